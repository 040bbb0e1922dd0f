"""The Redis queue's counters and store sizes (for ``/metrics``)."""

from __future__ import annotations

from collections.abc import Mapping

from tribunal.core.queue.redis_connection import RedisConnection


class RedisQueueStats(RedisConnection):
    """``QueueStats`` on Redis: a hash of counters per verifier (``memory_used`` is the
    connection's)."""

    async def incr_stats(self, verifier: str, counters: Mapping[str, int]) -> None:
        """HINCRBY each counter."""
        if not counters:
            return
        async with self.unavailable_as_503(), self.redis.pipeline(transaction=False) as pipe:
            for name, amount in counters.items():
                pipe.hincrby(self.keys.stats(verifier), name, amount)
            await pipe.execute()

    async def stats(self, verifier: str) -> dict[str, int]:
        """HGETALL of the counters."""
        async with self.unavailable_as_503():
            raw = await self.redis.hgetall(self.keys.stats(verifier))
        return {str(k): int(v) for k, v in raw.items()}

    async def store_sizes(self, verifier: str) -> dict[str, int]:
        """Sizes of the bounded stores of ``verifier``: ``dead_letters`` (entries kept),
        ``dead_letters_dropped`` (oldest dropped past the cap, ever) and ``done_jobs``
        (finished jobs kept, every verifier's)."""
        async with self.unavailable_as_503(), self.redis.pipeline(transaction=False) as pipe:
            pipe.xlen(self.keys.dead_letters(verifier))
            pipe.hget(self.keys.stats(verifier), "dead_lettered")
            pipe.zcard(self.keys.done_jobs)
            kept, ever, done = await pipe.execute()
        return {
            "dead_letters": int(kept),
            "dead_letters_dropped": max(0, int(ever or 0) - int(kept)),
            "done_jobs": int(done),
        }
