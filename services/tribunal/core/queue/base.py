"""The ``JobQueue`` interfaces shared by the Redis Streams queue and the embedded one.

A backend is a set of small interfaces, one per concern: :class:`JobStore` (jobs and their
results), :class:`WorkStream` (the entries workers claim and complete),
:class:`WorkerRegistry` (heartbeats, pool utilisation, refusals to start) and
:class:`QueueStats` (counters and store sizes), with :class:`QueueBackend` for what the
backend itself is. A caller that needs one concern types its argument with that interface;
one that must act differently on a backend asks a capability (``in_process``,
``claim_cancellable``), never the backend's name.

Vocabulary: a *job* is a queued batch (``job_id``); each of its *items* becomes one queue
entry; a *delivery* is one hand-over of an entry to a worker. Delivery is at least once: an
entry whose worker stops heartbeating for ``visibility_timeout_s`` is delivered again, and
results are written first-wins per item index, so a job never holds two results for an item.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tribunal.wire.errors import PayloadTooLarge


@dataclass(frozen=True)
class QueuedItem:
    """One item to enqueue.

    Attributes:
        index: Position of the item in its job (0-based).
        payload: The validated item as JSON-ready data.
        cache_key: Result cache key, or None when the item is not cached.
    """

    index: int
    payload: Mapping[str, Any]
    cache_key: str | None = None


@dataclass(frozen=True)
class Delivery:
    """One entry handed to a worker.

    Attributes:
        entry_id: The queue's id of the entry (a Redis stream id).
        job_id: The job the item belongs to.
        index: Position of the item in its job.
        payload: The item as enqueued.
        cache_key: As enqueued.
        deliveries: How many times this entry has been delivered, this one included.
        size: Bytes of the item's JSON as the queue stored it (0: not known, the embedded
            queue keeps items as objects); what the worker reads to validate it off the
            event loop (``core.offload``).
    """

    entry_id: str
    job_id: str
    index: int
    payload: Mapping[str, Any]
    cache_key: str | None
    deliveries: int
    size: int = 0


@dataclass(frozen=True)
class Submitted:
    """Answer of :meth:`JobQueue.submit`."""

    job_id: str
    created: bool


@dataclass
class JobRecord:
    """A job as stored: results (ItemResult JSON strings) by item index."""

    job_id: str
    verifier: str
    total: int
    results: dict[int, str] = field(default_factory=dict)

    @property
    def is_done(self) -> bool:
        """True when every item has a result."""
        return len(self.results) >= self.total


def never_fits(verifier: str, n_items: int, bound: int) -> PayloadTooLarge:
    """The error for a batch that can never fit the queue (a 429 would be retried for ever)."""
    return PayloadTooLarge(
        f"items: {n_items} items to queue, more than the {verifier} queue ever holds "
        f"({bound}, TRIBUNAL_MAX_QUEUE_ITEMS); split the batch",
        field="items",
    )


class QueueBackend(Protocol):
    """What a backend is: its name, its capabilities, its connection.

    Every method of every queue interface raises ``QueueUnavailable`` when the backing store
    cannot be reached.
    """

    name: str
    """``redis`` or ``memory``: reported by ``/readyz`` and in logs, never branched on."""

    in_process: bool
    """True when the queue lives in this process's memory: its workers must run in this
    process (no other process can reach it) and nothing survives a restart."""

    async def ping(self) -> None:
        """Check the backing store answers; raise ``QueueUnavailable`` if not."""
        ...

    async def aclose(self) -> None:
        """Close connections and stop background tasks."""
        ...


class JobStore(Protocol):
    """Jobs: created from a batch, read back with their results, awaited until done."""

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
        """Create a job of ``total`` items: ``prefilled`` results are stored at once, ``items``
        are enqueued.

        Raises:
            PayloadTooLarge: More ``items`` than the queue's bound: they can never fit.
            QueueFull: The queue holds ``max_queue_items`` or more entries already.
            IdempotencyConflict: ``idempotency_key`` names a job made from another batch.
        """
        ...

    async def job_of_key(self, verifier: str, idempotency_key: str) -> str | None:
        """The id of the job submitted to ``verifier`` with ``idempotency_key``, while the key
        is kept (``result_ttl_s``); None for a key never used or expired."""
        ...

    async def job(self, job_id: str) -> JobRecord:
        """Return the job as stored. Raises ``JobNotFound``."""
        ...

    async def wait(self, job_id: str, timeout_s: float) -> JobRecord:
        """Return the job once done, or as it is after ``timeout_s``. Raises ``JobNotFound``."""
        ...


class WorkStream(Protocol):
    """The entries of each verifier's queue, as workers claim, keep and complete them."""

    claim_cancellable: bool
    """True when cancelling a :meth:`claim` that is waiting loses nothing (it takes entries
    only as it returns); False when a cancelled claim may leave entries it took to wait out
    the visibility timeout (a claim then returns within ``block_s`` instead)."""

    async def ensure_verifier(self, verifier: str) -> None:
        """Create what ``verifier``'s queue needs (stream and consumer group); idempotent."""
        ...

    async def claim(
        self, verifier: str, consumer: str, count: int, block_s: float
    ) -> list[Delivery]:
        """Hand up to ``count`` entries to ``consumer``: entries left idle by a dead worker
        first, then new ones, waiting up to ``block_s`` for any."""
        ...

    async def extend(self, verifier: str, consumer: str, entry_ids: Sequence[str]) -> None:
        """Tell the queue ``consumer`` still works on these entries (resets their idle time)."""
        ...

    async def complete(
        self,
        verifier: str,
        done: Sequence[tuple[Delivery, str]],
        counters: Mapping[str, int] | None = None,
    ) -> None:
        """Store each result (first one wins per item), acknowledge its entry and add
        ``counters`` (scored, errors by code, cache hits) to the verifier's stats, at once."""
        ...

    async def release(self, verifier: str, consumer: str, entry_ids: Sequence[str]) -> None:
        """Give entries back unscored (a worker shutting down): any worker may claim them at
        its next reclaim, without waiting for the visibility timeout."""
        ...

    async def dead_letter(self, verifier: str, delivery: Delivery, reason: str) -> None:
        """Copy an entry to the verifier's dead-letter stream (its error result is written
        with :meth:`complete`)."""
        ...

    async def depth(self, verifier: str) -> int:
        """Entries queued or in flight for ``verifier``."""
        ...


class WorkerRegistry(Protocol):
    """The workers of each verifier: their heartbeats, their pools, why they refused."""

    async def heartbeat(
        self,
        verifier: str,
        consumer: str,
        utilisation: tuple[int, int] | None = None,
        backend: tuple[int, int] | None = None,
    ) -> None:
        """Record that worker ``consumer`` is alive, with its pool's ``(busy, capacity)``
        (verification processes or sandbox slots) and its LLM backend's ``(calls in
        flight, concurrency bound)`` when it has them."""
        ...

    async def utilisation(self, verifier: str, within_s: float) -> tuple[int, int]:
        """Sum ``(busy, capacity)`` over the workers of ``verifier`` that sent a heartbeat
        within ``within_s`` (``(0, 0)`` when none reported a pool)."""
        ...

    async def backend_load(self, verifier: str, within_s: float) -> tuple[int, int]:
        """Sum the LLM backends' ``(in flight, bound)`` over the live workers of ``verifier``
        (``(0, 0)`` when none reported a backend)."""
        ...

    async def retire(self, verifier: str, consumer: str) -> None:
        """Forget worker ``consumer``'s heartbeat (it stopped): ``/readyz`` sees it at once
        rather than after the heartbeat window."""
        ...

    async def live_workers(self, verifier: str, within_s: float) -> int:
        """Count workers of ``verifier`` that sent a heartbeat within ``within_s``."""
        ...

    async def set_refusal(self, verifier: str, reason: str | None) -> None:
        """Record why a worker of ``verifier`` refused to start, or clear it (``None``) once
        one starts; ``/readyz`` and submissions report it while no worker is live."""
        ...

    async def refusal(self, verifier: str) -> str | None:
        """Return the recorded refusal of ``verifier``'s workers, if any."""
        ...


class QueueStats(Protocol):
    """Cluster-wide counters and the sizes of the bounded stores (for ``/metrics``)."""

    async def oldest_entry(self, verifier: str) -> str | None:
        """The id (``<ms>-<seq>``) of the oldest entry of ``verifier`` queued or in flight,
        or None when there is none (for ``/metrics``: its age)."""
        ...

    async def incr_stats(self, verifier: str, counters: Mapping[str, int]) -> None:
        """Add to cluster-wide counters (for ``/metrics``)."""
        ...

    async def stats(self, verifier: str) -> dict[str, int]:
        """Return the cluster-wide counters."""
        ...

    async def store_sizes(self, verifier: str) -> dict[str, int]:
        """Sizes of the bounded stores (for ``/metrics``): ``dead_letters`` (entries kept),
        ``dead_letters_dropped`` (dropped past ``max_dead_letters``, ever) and ``done_jobs``
        (finished jobs kept, all verifiers')."""
        ...

    async def memory_used(self) -> int | None:
        """Bytes the backing store uses (Redis's ``used_memory``); None in this process."""
        ...


class JobQueue(QueueBackend, JobStore, WorkStream, WorkerRegistry, QueueStats, Protocol):
    """A whole queue backend, every concern; both implementations pass
    ``tests/core/test_queue_contract.py``."""
