"""The embedded queue: the ``JobQueue`` contract in one process, for running without Redis.

Single host, nothing survives a restart. It keeps the same semantics as the Redis queue
(visibility timeout, delivery counts, first result wins, bound, idempotency) so that the
worker runtime and the API cannot tell them apart, and so both pass one contract suite.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping, Sequence

from tribunal.core.queue.base import Delivery
from tribunal.core.queue.memory_jobs import MemoryJobStore
from tribunal.core.queue.memory_state import MemoryState, Pending, VerifierStream
from tribunal.core.queue.memory_stats import MemoryQueueStats
from tribunal.core.queue.memory_workers import MemoryWorkerRegistry


class MemoryWorkStream(MemoryState):
    """``WorkStream`` in this process: each verifier's ready entries, the pending ones with
    their consumer and idle time (the visibility timeout), and the dead letters."""

    async def ensure_verifier(self, verifier: str) -> None:
        """Create the verifier's stream."""
        self._stream(verifier)

    async def claim(
        self, verifier: str, consumer: str, count: int, block_s: float
    ) -> list[Delivery]:
        """Reclaim entries idle past the visibility timeout, then take ready ones."""
        stream = self._stream(verifier)
        deadline = time.monotonic() + block_s
        while True:
            taken = self._take(stream, consumer, count)
            remaining = deadline - time.monotonic()
            if taken or remaining <= 0:
                return taken
            stream.arrived.clear()
            wake = min(remaining, self.visibility_timeout_s / 4)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stream.arrived.wait(), wake)

    def _take(self, stream: VerifierStream, consumer: str, count: int) -> list[Delivery]:
        now = time.monotonic()
        taken: list[Delivery] = []
        for entry_id, pending in list(stream.pending.items()):
            if len(taken) >= count:
                break
            if now - pending.last_seen >= self.visibility_timeout_s:
                taken.append(self._hand_over(stream, pending.delivery, consumer, now, entry_id))
        while stream.ready and len(taken) < count:
            delivery = stream.ready.popleft()
            taken.append(self._hand_over(stream, delivery, consumer, now, delivery.entry_id))
        return taken

    @staticmethod
    def _hand_over(
        stream: VerifierStream, delivery: Delivery, consumer: str, now: float, entry_id: str
    ) -> Delivery:
        handed = Delivery(
            entry_id=entry_id,
            job_id=delivery.job_id,
            index=delivery.index,
            payload=delivery.payload,
            cache_key=delivery.cache_key,
            deliveries=delivery.deliveries + 1,
        )
        stream.pending.pop(entry_id, None)
        stream.pending[entry_id] = Pending(handed, consumer, now)
        return handed

    async def extend(self, verifier: str, consumer: str, entry_ids: Sequence[str]) -> None:
        """Reset the idle time of the consumer's entries."""
        stream = self._stream(verifier)
        now = time.monotonic()
        for entry_id in entry_ids:
            pending = stream.pending.get(entry_id)
            if pending is not None:
                pending.consumer = consumer
                pending.last_seen = now

    async def release(self, verifier: str, consumer: str, entry_ids: Sequence[str]) -> None:
        """Make the consumer's entries claimable at once (idle since forever)."""
        stream = self._stream(verifier)
        for entry_id in entry_ids:
            pending = stream.pending.get(entry_id)
            if pending is not None and pending.consumer == consumer:
                pending.last_seen = float("-inf")
        stream.arrived.set()

    async def complete(
        self,
        verifier: str,
        done: Sequence[tuple[Delivery, str]],
        counters: Mapping[str, int] | None = None,
    ) -> None:
        """Store results first-wins, drop their entries and add ``counters`` to the stats."""
        stream = self._stream(verifier)
        for name, amount in (counters or {}).items():
            stream.stats[name] = stream.stats.get(name, 0) + amount
        for delivery, result in done:
            stream.pending.pop(delivery.entry_id, None)
            job = self._jobs.get(delivery.job_id)
            if job is None:
                continue
            job.record.results.setdefault(delivery.index, result)
            if job.record.is_done:
                job.done.set()

    async def dead_letter(self, verifier: str, delivery: Delivery, reason: str) -> None:
        """Keep the entry in the verifier's dead-letter list (the newest
        ``max_dead_letters``)."""
        stream = self._stream(verifier)
        stream.dead.append((delivery, reason))
        stream.stats["dead_lettered"] = stream.stats.get("dead_lettered", 0) + 1
        while len(stream.dead) > self.max_dead_letters:
            stream.dead.popleft()

    async def depth(self, verifier: str) -> int:
        """Ready plus in-flight entries."""
        stream = self._stream(verifier)
        return len(stream.ready) + len(stream.pending)

    async def oldest_entry(self, verifier: str) -> str | None:
        """The id of the oldest entry queued or in flight."""
        stream = self._stream(verifier)
        # Claimed again, an entry moves to the end of ``pending``: its first is not the oldest.
        ids = [*([stream.ready[0].entry_id] if stream.ready else []), *stream.pending]
        return min(ids, key=lambda i: tuple(map(int, i.split("-"))), default=None)

    def dead_letters(self, verifier: str) -> list[tuple[Delivery, str]]:
        """Entries moved to the dead-letter list, with their reason (for inspection)."""
        return list(self._stream(verifier).dead)


class MemoryQueue(MemoryJobStore, MemoryWorkStream, MemoryWorkerRegistry, MemoryQueueStats):
    """``JobQueue`` held in this process's memory (asyncio, one event loop).

    Args:
        max_queue_items: Bound on entries per verifier (429 above).
        result_ttl_s: Lifetime of jobs and idempotency keys (s).
        visibility_timeout_s: Idle time after which another consumer may claim an entry (s).
        max_dead_letters: Entries kept per dead-letter list; the oldest beyond are dropped
            and counted.
        retry_after_s: Retry-After sent with ``QueueFull`` (s).
    """

    def __init__(
        self,
        *,
        max_queue_items: int,
        result_ttl_s: int,
        visibility_timeout_s: float,
        max_dead_letters: int = 10_000,
        retry_after_s: float = 1.0,
    ) -> None:
        super().__init__()
        self.max_queue_items = max_queue_items
        self.max_dead_letters = max_dead_letters
        self.result_ttl_s = result_ttl_s
        self.visibility_timeout_s = visibility_timeout_s
        self.retry_after_s = retry_after_s
