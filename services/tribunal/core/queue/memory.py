"""The embedded queue: the ``JobQueue`` contract in one process, for running without Redis.

Single host, nothing survives a restart. It keeps the same semantics as the Redis queue
(visibility timeout, delivery counts, first result wins, bound, idempotency) so that the
worker runtime and the API cannot tell them apart, and so both pass one contract suite.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tribunal.core.queue.base import Delivery, JobRecord, QueuedItem, Submitted, never_fits
from tribunal.wire.errors import IdempotencyConflict, JobNotFound, QueueFull


@dataclass
class _Pending:
    delivery: Delivery
    consumer: str
    last_seen: float


@dataclass
class _Stream:
    ready: deque[Delivery] = field(default_factory=deque)
    pending: OrderedDict[str, _Pending] = field(default_factory=OrderedDict)
    dead: deque[tuple[Delivery, str]] = field(default_factory=deque)
    workers: dict[str, float] = field(default_factory=dict)
    utilisation: dict[str, tuple[int, ...]] = field(default_factory=dict)
    stats: dict[str, int] = field(default_factory=dict)
    refusal: str | None = None
    arrived: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class _Job:
    record: JobRecord
    expires_at: float
    done: asyncio.Event = field(default_factory=asyncio.Event)


class MemoryQueue:
    """``JobQueue`` held in this process's memory (asyncio, one event loop).

    Args:
        max_queue_items: Bound on entries per verifier (429 above).
        result_ttl_s: Lifetime of jobs and idempotency keys (s).
        visibility_timeout_s: Idle time after which another consumer may claim an entry (s).
        max_dead_letters: Entries kept per dead-letter list; the oldest beyond are dropped
            and counted.
        retry_after_s: Retry-After sent with ``QueueFull`` (s).
    """

    name = "memory"
    in_process = True
    claim_cancellable = True

    def __init__(
        self,
        *,
        max_queue_items: int,
        result_ttl_s: int,
        visibility_timeout_s: float,
        max_dead_letters: int = 10_000,
        retry_after_s: float = 1.0,
    ) -> None:
        self.max_queue_items = max_queue_items
        self.max_dead_letters = max_dead_letters
        self.result_ttl_s = result_ttl_s
        self.visibility_timeout_s = visibility_timeout_s
        self.retry_after_s = retry_after_s
        self._streams: dict[str, _Stream] = {}
        self._jobs: dict[str, _Job] = {}
        self._idempotency: dict[tuple[str, str], tuple[str, str, float]] = {}
        self._ids = itertools.count(1)

    def _stream(self, verifier: str) -> _Stream:
        return self._streams.setdefault(verifier, _Stream())

    def _expire(self) -> None:
        now = time.monotonic()
        for job_id in [j for j, job in self._jobs.items() if job.expires_at < now]:
            del self._jobs[job_id]
        for key in [k for k, v in self._idempotency.items() if v[2] < now]:
            del self._idempotency[key]

    async def ping(self) -> None:
        """Always answers: the queue is in this process."""

    async def ensure_verifier(self, verifier: str) -> None:
        """Create the verifier's stream."""
        self._stream(verifier)

    async def submit(
        self,
        verifier: str,
        items: Sequence[QueuedItem],
        *,
        total: int,
        prefilled: Mapping[int, str],
        idempotency_key: str | None = None,
        request_hash: str = "",
    ) -> Submitted:
        """Create a job; see ``JobQueue.submit``."""
        self._expire()
        if idempotency_key is not None:
            existing = self._idempotency.get((verifier, idempotency_key))
            if existing is not None:
                if existing[1] != request_hash:
                    raise IdempotencyConflict(
                        f"idempotency_key {idempotency_key!r} was used for a different batch "
                        f"(job {existing[0]})",
                        field="idempotency_key",
                    )
                return Submitted(job_id=existing[0], created=False)
        stream = self._stream(verifier)
        depth = len(stream.ready) + len(stream.pending)
        if len(items) > self.max_queue_items:
            raise never_fits(verifier, len(items), self.max_queue_items)
        if items and depth + len(items) > self.max_queue_items:
            raise QueueFull(
                f"the {verifier} queue is full ({depth} items waiting, bound "
                f"{self.max_queue_items}); retry later",
                retry_after_s=self.retry_after_s,
            )
        job_id = uuid.uuid4().hex
        expires_at = time.monotonic() + self.result_ttl_s
        job = _Job(JobRecord(job_id, verifier, total, dict(prefilled)), expires_at)
        self._jobs[job_id] = job
        for item in items:
            stream.ready.append(
                Delivery(
                    # Redis's form (milliseconds-sequence): its age is read from it.
                    entry_id=f"{int(time.time() * 1000)}-{next(self._ids)}",
                    job_id=job_id,
                    index=item.index,
                    payload=item.payload,
                    cache_key=item.cache_key,
                    deliveries=0,
                )
            )
        if items:
            stream.arrived.set()
        if job.record.is_done:
            job.done.set()
        if idempotency_key is not None:
            self._idempotency[(verifier, idempotency_key)] = (job_id, request_hash, expires_at)
        return Submitted(job_id=job_id, created=True)

    async def job_of_key(self, verifier: str, idempotency_key: str) -> str | None:
        """The job the key names, while it is kept."""
        self._expire()
        found = self._idempotency.get((verifier, idempotency_key))
        return found[0] if found is not None else None

    async def job(self, job_id: str) -> JobRecord:
        """Return a copy of the job; raise ``JobNotFound`` when unknown or expired."""
        self._expire()
        job = self._jobs.get(job_id)
        if job is None:
            raise JobNotFound(f"no job {job_id!r} (never created, or expired)", field="job_id")
        record = job.record
        return JobRecord(record.job_id, record.verifier, record.total, dict(record.results))

    async def wait(self, job_id: str, timeout_s: float) -> JobRecord:
        """Wait until the job is done or ``timeout_s`` passes."""
        job = self._jobs.get(job_id)
        if job is not None and not job.record.is_done:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(job.done.wait(), timeout_s)
        return await self.job(job_id)

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

    def _take(self, stream: _Stream, consumer: str, count: int) -> list[Delivery]:
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
        stream: _Stream, delivery: Delivery, consumer: str, now: float, entry_id: str
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
        stream.pending[entry_id] = _Pending(handed, consumer, now)
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

    async def heartbeat(
        self,
        verifier: str,
        consumer: str,
        utilisation: tuple[int, int] | None = None,
        backend: tuple[int, int] | None = None,
    ) -> None:
        """Record the worker's heartbeat time (and its pool's and backend's load)."""
        stream = self._stream(verifier)
        stream.workers[consumer] = time.time()
        if utilisation is not None or backend is not None:
            stream.utilisation[consumer] = (*(utilisation or (0, 0)), *(backend or ()))

    async def retire(self, verifier: str, consumer: str) -> None:
        """Forget the worker's heartbeat."""
        self._stream(verifier).workers.pop(consumer, None)
        self._stream(verifier).utilisation.pop(consumer, None)

    async def utilisation(self, verifier: str, within_s: float) -> tuple[int, int]:
        """Sum the last reported utilisation of the live workers."""
        stream = self._stream(verifier)
        cutoff = time.time() - within_s
        live = [stream.utilisation.get(c) for c, t in stream.workers.items() if t >= cutoff]
        reported = [u for u in live if u is not None]
        return sum(u[0] for u in reported), sum(u[1] for u in reported)

    async def backend_load(self, verifier: str, within_s: float) -> tuple[int, int]:
        """Sum the last reported backend load of the live workers."""
        stream = self._stream(verifier)
        cutoff = time.time() - within_s
        live = [stream.utilisation.get(c) for c, t in stream.workers.items() if t >= cutoff]
        reported = [u for u in live if u is not None and len(u) == 4]
        return sum(u[2] for u in reported), sum(u[3] for u in reported)

    async def live_workers(self, verifier: str, within_s: float) -> int:
        """Count heartbeats newer than ``within_s``."""
        cutoff = time.time() - within_s
        return sum(1 for t in self._stream(verifier).workers.values() if t >= cutoff)

    async def set_refusal(self, verifier: str, reason: str | None) -> None:
        """Record or clear the refusal."""
        self._stream(verifier).refusal = reason

    async def refusal(self, verifier: str) -> str | None:
        """Return the refusal."""
        return self._stream(verifier).refusal

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

    async def incr_stats(self, verifier: str, counters: Mapping[str, int]) -> None:
        """Add to the counters."""
        stats = self._stream(verifier).stats
        for name, amount in counters.items():
            stats[name] = stats.get(name, 0) + amount

    async def stats(self, verifier: str) -> dict[str, int]:
        """Return a copy of the counters."""
        return dict(self._stream(verifier).stats)

    def dead_letters(self, verifier: str) -> list[tuple[Delivery, str]]:
        """Entries moved to the dead-letter list, with their reason (for inspection)."""
        return list(self._stream(verifier).dead)

    async def store_sizes(self, verifier: str) -> dict[str, int]:
        """Dead letters kept and dropped; jobs held (done or not, until their TTL)."""
        self._expire()
        stream = self._stream(verifier)
        return {
            "dead_letters": len(stream.dead),
            "dead_letters_dropped": stream.stats.get("dead_lettered", 0) - len(stream.dead),
            "done_jobs": sum(1 for job in self._jobs.values() if job.record.is_done),
        }

    async def memory_used(self) -> int | None:
        """None: the queue is part of this process's memory."""
        return None

    async def aclose(self) -> None:
        """Nothing to close."""
