"""The Redis worker registry: heartbeats, pool utilisation and refusals to start."""

from __future__ import annotations

import time

from tribunal.core.queue.redis_connection import RedisConnection

_REFUSAL_TTL_S = 7 * 86400
"""A worker's refusal to start is forgotten after a week (or as soon as one starts)."""


class RedisWorkerRegistry(RedisConnection):
    """``WorkerRegistry`` on Redis: a sorted set of heartbeats and a hash of utilisation per
    verifier, and a string per verifier for its workers' refusal."""

    async def heartbeat(
        self,
        verifier: str,
        consumer: str,
        utilisation: tuple[int, int] | None = None,
        backend: tuple[int, int] | None = None,
    ) -> None:
        """Record the worker's heartbeat time (and its pool's and backend's load, as
        ``"busy capacity[ in_flight bound]"``)."""
        async with self.unavailable_as_503(), self.redis.pipeline(transaction=False) as pipe:
            pipe.zadd(self.keys.workers(verifier), {consumer: time.time()})
            if utilisation is not None or backend is not None:
                loads = [*(utilisation or (0, 0)), *(backend or ())]
                pipe.hset(self.keys.utilisation(verifier), consumer, " ".join(map(str, loads)))
            await pipe.execute()

    async def retire(self, verifier: str, consumer: str) -> None:
        """ZREM the worker's heartbeat."""
        async with self.unavailable_as_503(), self.redis.pipeline(transaction=False) as pipe:
            pipe.zrem(self.keys.workers(verifier), consumer)
            pipe.hdel(self.keys.utilisation(verifier), consumer)
            await pipe.execute()

    async def utilisation(self, verifier: str, within_s: float) -> tuple[int, int]:
        """Sum the last reported utilisation of the live workers."""
        loads = await self._loads(verifier, within_s)
        return sum(load[0] for load in loads), sum(load[1] for load in loads)

    async def backend_load(self, verifier: str, within_s: float) -> tuple[int, int]:
        """Sum the last reported backend load of the live workers."""
        loads = [load for load in await self._loads(verifier, within_s) if len(load) == 4]
        return sum(load[2] for load in loads), sum(load[3] for load in loads)

    async def _loads(self, verifier: str, within_s: float) -> list[list[int]]:
        async with self.unavailable_as_503():
            live = await self.redis.zrangebyscore(
                self.keys.workers(verifier), time.time() - within_s, "+inf"
            )
            if not live:
                return []
            values = await self.redis.hmget(self.keys.utilisation(verifier), [*map(str, live)])
        return [[int(part) for part in value.split()] for value in values if value is not None]

    async def live_workers(self, verifier: str, within_s: float) -> int:
        """Count heartbeats newer than ``within_s``; forget workers silent for an hour."""
        key = self.keys.workers(verifier)
        now = time.time()
        async with self.unavailable_as_503(), self.redis.pipeline(transaction=False) as pipe:
            pipe.zremrangebyscore(key, "-inf", now - 3600)
            pipe.zcount(key, now - within_s, "+inf")
            _, live = await pipe.execute()
        return int(live)

    async def set_refusal(self, verifier: str, reason: str | None) -> None:
        """Record or clear the refusal (kept a week at most: it describes one deployment)."""
        key = self.keys.refusal(verifier)
        async with self.unavailable_as_503():
            if reason is None:
                await self.redis.delete(key)
            else:
                await self.redis.set(key, reason, ex=_REFUSAL_TTL_S)

    async def refusal(self, verifier: str) -> str | None:
        """Return the refusal."""
        async with self.unavailable_as_503():
            value = await self.redis.get(self.keys.refusal(verifier))
        return value.decode() if isinstance(value, bytes) else value
