"""The Redis job store: jobs created atomically from a batch, read back, awaited.

Submission is one Lua script (idempotency check, bound check, job metadata and one XADD per
item, atomically). A job is done when its last result lands (``redis_streams``' completion
script), which publishes its id on the done channel: waiters in every process wake on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from tribunal.core.queue.base import JobRecord, QueuedItem, Submitted, never_fits
from tribunal.core.queue.keys import lua_functions
from tribunal.core.queue.redis_connection import RedisConnection
from tribunal.wire.errors import IdempotencyConflict, JobNotFound, QueueFull, QueueUnavailable

logger = logging.getLogger(__name__)

# A finished job joins the done index; beyond max_done the oldest finished jobs are deleted
# (metadata, results and idempotency key): with the TTL, this bounds what jobs hold.
KEEP_DONE = (
    lua_functions()
    + """
local function keep_done(prefix, job_id, now, max_done)
  local done = done_jobs_key(prefix)
  redis.call('ZADD', done, now, job_id)
  local over = redis.call('ZCARD', done) - max_done
  if over > 0 then
    local old = redis.call('ZPOPMIN', done, over)
    for i = 1, #old, 2 do
      local meta = job_key(prefix, old[i])
      local idem = redis.call('HGET', meta, 'idem')
      if idem then redis.call('DEL', idem) end
      redis.call('DEL', meta, results_key(prefix, old[i]))
    end
  end
end
"""
)

_SUBMIT = (
    KEEP_DONE
    + """
local stream, meta, results, idem = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local max_queue, ttl, job_id, verifier = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], ARGV[4]
local total, request_hash = tonumber(ARGV[5]), ARGV[6]
local n_pre, n_items, channel = tonumber(ARGV[7]), tonumber(ARGV[8]), ARGV[9]
local prefix, now, max_done = ARGV[10], ARGV[11], tonumber(ARGV[12])
if redis.call('EXISTS', meta) == 1 then return {'created', job_id} end
if idem ~= '' then
  local existing = redis.call('GET', idem)
  if existing then return {'existing', existing} end
end
local depth = redis.call('XLEN', stream)
if n_items > 0 and depth + n_items > max_queue then return {'full', tostring(depth)} end
redis.call('HSET', meta, 'verifier', verifier, 'total', total)
if idem ~= '' then redis.call('HSET', meta, 'idem', idem) end
redis.call('EXPIRE', meta, ttl)
local a = 13
for _ = 1, n_pre do
  redis.call('HSET', results, ARGV[a], ARGV[a + 1])
  a = a + 2
end
if n_pre > 0 then redis.call('EXPIRE', results, ttl) end
for _ = 1, n_items do
  redis.call('XADD', stream, '*', 'job', job_id, 'index', ARGV[a], 'item', ARGV[a + 1],
             'cache', ARGV[a + 2])
  a = a + 3
end
if idem ~= '' then redis.call('SET', idem, job_id .. '|' .. request_hash, 'EX', ttl) end
if n_items == 0 then
  keep_done(prefix, job_id, now, max_done)
  redis.call('PUBLISH', channel, job_id)
end
return {'created', job_id}
"""
)


class RedisJobStore(RedisConnection):
    """``JobStore`` on Redis: a hash of metadata and a hash of results per job, with a TTL.

    Attributes read (set by the queue that composes it): ``max_queue_items``,
    ``result_ttl_s``, ``max_done_jobs``.
    """

    max_queue_items: int
    result_ttl_s: int
    max_done_jobs: int

    def _start_jobs(self) -> None:
        self._submit = self.redis.register_script(_SUBMIT)
        self._waiters: dict[str, set[asyncio.Event]] = {}
        self._listener: asyncio.Task[None] | None = None
        self._closing = False

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
        """Create a job atomically; see ``JobQueue.submit``."""
        if len(items) > self.max_queue_items:
            raise never_fits(verifier, len(items), self.max_queue_items)
        job_id = uuid.uuid4().hex
        idem = self.keys.idempotency(verifier, idempotency_key) if idempotency_key else ""
        args: list[Any] = [
            self.max_queue_items,
            self.result_ttl_s,
            job_id,
            verifier,
            total,
            request_hash,
            len(prefilled),
            len(items),
            self.keys.done_channel,
            self.keys.prefix,
            time.time(),
            self.max_done_jobs,
        ]
        for index, result in prefilled.items():
            args += [index, result]
        for item in items:
            args += [item.index, json.dumps(item.payload), item.cache_key or ""]
        keys = [self.keys.stream(verifier), self.keys.job(job_id), self.keys.results(job_id), idem]
        try:
            async with self.unavailable_as_503():
                status, value = await self._submit(keys=keys, args=args)
        except QueueUnavailable as exc:
            # The script may have run before the connection failed: name the job it would
            # be, so the client can look (404: nothing was enqueued).
            raise QueueUnavailable(
                f"{exc.message}; if the batch reached Redis before that it is job {job_id} "
                f"(GET /v1/jobs/{job_id}: 404 means nothing was enqueued)",
                retry_after_s=exc.retry_after_s,
                job_id=job_id,
            ) from exc
        if status == "full":
            raise QueueFull(
                f"the {verifier} queue is full ({value} items waiting, bound "
                f"{self.max_queue_items}); retry later",
                retry_after_s=self.retry_after_s,
            )
        if status == "existing":
            existing_job, _, existing_hash = value.partition("|")
            if existing_hash != request_hash:
                raise IdempotencyConflict(
                    f"idempotency_key {idempotency_key!r} was used for a different batch "
                    f"(job {existing_job})",
                    field="idempotency_key",
                )
            return Submitted(job_id=existing_job, created=False)
        return Submitted(job_id=job_id, created=True)

    async def job_of_key(self, verifier: str, idempotency_key: str) -> str | None:
        """GET of the idempotency key (``<job id>|<request hash>``)."""
        async with self.unavailable_as_503():
            value = await self.redis.get(self.keys.idempotency(verifier, idempotency_key))
        return str(value).partition("|")[0] if value else None

    async def job(self, job_id: str) -> JobRecord:
        """Return the stored job; raise ``JobNotFound`` when it never existed or expired."""
        async with self.unavailable_as_503(), self.redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(self.keys.job(job_id))
            pipe.hgetall(self.keys.results(job_id))
            meta, results = await pipe.execute()
        if not meta:
            raise JobNotFound(f"no job {job_id!r} (never created, or expired)", field="job_id")
        return JobRecord(
            job_id=job_id,
            verifier=meta["verifier"],
            total=int(meta["total"]),
            results={int(k): v for k, v in results.items()},
        )

    async def wait(self, job_id: str, timeout_s: float) -> JobRecord:
        """Wait for the done notification, re-reading the job at least once a second in
        case a notification was lost while the pub/sub connection was down."""
        self._ensure_listener()
        event = asyncio.Event()
        self._waiters.setdefault(job_id, set()).add(event)
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                record = await self.job(job_id)
                remaining = deadline - time.monotonic()
                if record.is_done or remaining <= 0:
                    return record
                # Jittered, so that waiters started together do not re-read together.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), min(remaining, random.uniform(1.0, 2.0)))
                event.clear()
        finally:
            waiters = self._waiters.get(job_id)
            if waiters is not None:
                waiters.discard(event)
                if not waiters:
                    del self._waiters[job_id]

    def _ensure_listener(self) -> None:
        if self._listener is None or self._listener.done():
            self._listener = asyncio.create_task(self._listen(), name="tribunal-done-listener")

    async def _listen(self) -> None:
        """Wake the local waiters of each job id published on the done channel.

        Polls with a timeout rather than ``pubsub.listen()``: a task blocked in ``listen`` does
        not always honour cancellation (redis-py), and ``aclose`` must not hang on it.
        """
        while not self._closing:
            try:
                async with self.redis.pubsub(ignore_subscribe_messages=True) as pubsub:
                    await pubsub.subscribe(self.keys.done_channel)
                    while not self._closing:
                        message = await pubsub.get_message(timeout=0.5)
                        if message is None:
                            continue
                        for event in self._waiters.get(message["data"], ()):
                            event.set()
            except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
                logger.warning("done-channel listener lost Redis (%s); reconnecting", exc)
                await asyncio.sleep(1.0)

    async def aclose(self) -> None:
        """Stop the listener and close the connection pool."""
        self._closing = True
        if self._listener is not None:
            try:
                await asyncio.wait_for(self._listener, 2.0)
            except Exception:
                logger.warning("the done-channel listener did not stop cleanly", exc_info=True)
        await super().aclose()
