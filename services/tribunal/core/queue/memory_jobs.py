"""The embedded queue's jobs: submission (bound, idempotency), records, waiting."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
import uuid
from collections.abc import Mapping, Sequence

from tribunal.core.queue.base import Delivery, JobRecord, QueuedItem, Submitted, never_fits
from tribunal.core.queue.memory_state import HeldJob, MemoryState
from tribunal.wire.errors import IdempotencyConflict, JobNotFound, QueueFull


class MemoryJobStore(MemoryState):
    """``JobStore`` in this process: jobs and idempotency keys kept for ``result_ttl_s``."""

    def __init__(self) -> None:
        super().__init__()
        self._ids = itertools.count(1)

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
        job = HeldJob(JobRecord(job_id, verifier, total, dict(prefilled)), expires_at)
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
