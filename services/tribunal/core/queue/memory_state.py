"""What every part of the embedded queue shares: its bounds and its state in this process."""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from tribunal.core.queue.base import Delivery, JobRecord


@dataclass
class Pending:
    """An entry claimed and not yet completed: by whom, and when it was last seen."""

    delivery: Delivery
    consumer: str
    last_seen: float


@dataclass
class VerifierStream:
    """One verifier's entries (ready, pending, dead), workers and counters."""

    ready: deque[Delivery] = field(default_factory=deque)
    pending: OrderedDict[str, Pending] = field(default_factory=OrderedDict)
    dead: deque[tuple[Delivery, str]] = field(default_factory=deque)
    workers: dict[str, float] = field(default_factory=dict)
    utilisation: dict[str, tuple[int, ...]] = field(default_factory=dict)
    stats: dict[str, int] = field(default_factory=dict)
    refusal: str | None = None
    arrived: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class HeldJob:
    """A job, when it expires (``time.monotonic()``), and an event set once it is done."""

    record: JobRecord
    expires_at: float
    done: asyncio.Event = field(default_factory=asyncio.Event)


class MemoryState:
    """The state every part of the embedded queue reads (the counterpart of
    ``RedisConnection``): the verifiers' streams, the jobs, the idempotency keys, and the
    bounds that ``MemoryQueue`` sets.
    """

    name = "memory"
    in_process = True
    claim_cancellable = True

    max_queue_items: int
    max_dead_letters: int
    result_ttl_s: int
    visibility_timeout_s: float
    retry_after_s: float

    def __init__(self) -> None:
        self._streams: dict[str, VerifierStream] = {}
        self._jobs: dict[str, HeldJob] = {}
        self._idempotency: dict[tuple[str, str], tuple[str, str, float]] = {}

    def _stream(self, verifier: str) -> VerifierStream:
        return self._streams.setdefault(verifier, VerifierStream())

    def _expire(self) -> None:
        now = time.monotonic()
        for job_id in [j for j, job in self._jobs.items() if job.expires_at < now]:
            del self._jobs[job_id]
        for key in [k for k, v in self._idempotency.items() if v[2] < now]:
            del self._idempotency[key]

    async def ping(self) -> None:
        """Always answers: the queue is in this process."""

    async def memory_used(self) -> int | None:
        """None: the queue is part of this process's memory."""
        return None

    async def aclose(self) -> None:
        """Nothing to close."""
