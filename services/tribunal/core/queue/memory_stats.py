"""The embedded queue's counters and store sizes."""

from __future__ import annotations

from collections.abc import Mapping

from tribunal.core.queue.memory_state import MemoryState


class MemoryQueueStats(MemoryState):
    """``QueueStats`` in this process: each verifier's counters and what its stores hold."""

    async def incr_stats(self, verifier: str, counters: Mapping[str, int]) -> None:
        """Add to the counters."""
        stats = self._stream(verifier).stats
        for name, amount in counters.items():
            stats[name] = stats.get(name, 0) + amount

    async def stats(self, verifier: str) -> dict[str, int]:
        """Return a copy of the counters."""
        return dict(self._stream(verifier).stats)

    async def store_sizes(self, verifier: str) -> dict[str, int]:
        """Dead letters kept and dropped; jobs held (done or not, until their TTL)."""
        self._expire()
        stream = self._stream(verifier)
        return {
            "dead_letters": len(stream.dead),
            "dead_letters_dropped": stream.stats.get("dead_lettered", 0) - len(stream.dead),
            "done_jobs": sum(1 for job in self._jobs.values() if job.record.is_done),
        }
