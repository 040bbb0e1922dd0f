"""The Redis Streams queue: one stream per verifier, one consumer group, results per job.

Submission is one Lua script (idempotency check, bound check, job metadata and one XADD per
item, atomically); completion is another (first result wins per item index, then XACK and
XDEL, and a publish on the done channel when the job's last result lands). Workers read with
XREADGROUP, keep their entries with a heartbeat (XCLAIM ... JUSTID resets the idle time
without counting a delivery) and pick up the entries of dead workers with XAUTOCLAIM once
those have been idle for the visibility timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import OutOfMemoryError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from tribunal.core.errors import (
    ConfigurationError,
    IdempotencyConflict,
    JobNotFound,
    QueueFull,
    QueueUnavailable,
)
from tribunal.core.queue.base import Delivery, JobRecord, QueuedItem, Submitted, never_fits
from tribunal.core.queue.keys import CONSUMER_GROUP, Keys

logger = logging.getLogger(__name__)

_REFUSAL_TTL_S = 7 * 86400
"""A worker's refusal to start is forgotten after a week (or as soon as one starts)."""

# A finished job joins the done index; beyond max_done the oldest finished jobs are deleted
# (metadata, results and idempotency key): with the TTL, this bounds what jobs hold.
_KEEP_DONE = """
local function keep_done(prefix, job_id, now, max_done)
  local done = prefix .. ':jobs:done'
  redis.call('ZADD', done, now, job_id)
  local over = redis.call('ZCARD', done) - max_done
  if over > 0 then
    local old = redis.call('ZPOPMIN', done, over)
    for i = 1, #old, 2 do
      local meta = prefix .. ':job:' .. old[i]
      local idem = redis.call('HGET', meta, 'idem')
      if idem then redis.call('DEL', idem) end
      redis.call('DEL', meta, meta .. ':results')
    end
  end
end
"""

_SUBMIT = (
    _KEEP_DONE
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

_COMPLETE = (
    _KEEP_DONE
    + """
local stream, stats = KEYS[1], KEYS[2]
local group, ttl, prefix, channel = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local now, max_done = ARGV[6], tonumber(ARGV[7])
local a = 8
for _ = 1, tonumber(ARGV[5]) do
  redis.call('HINCRBY', stats, ARGV[a], ARGV[a + 1])
  a = a + 2
end
while a <= #ARGV do
  local entry, job_id, index, result = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
  local results = prefix .. ':job:' .. job_id .. ':results'
  if redis.call('HSETNX', results, index, result) == 1 then
    redis.call('EXPIRE', results, ttl)
    local total = redis.call('HGET', prefix .. ':job:' .. job_id, 'total')
    if total and redis.call('HLEN', results) >= tonumber(total) then
      keep_done(prefix, job_id, now, max_done)
      redis.call('PUBLISH', channel, job_id)
    end
  end
  redis.call('XACK', stream, group, entry)
  redis.call('XDEL', stream, entry)
  a = a + 4
end
return 1
"""
)


class RedisStreamsQueue:
    """``JobQueue`` on Redis Streams (redis-py asyncio).

    Args:
        url: Redis URL (``redis://host:port/db``).
        keys: Key names under the configured prefix.
        max_queue_items: Bound on entries per verifier stream (429 above).
        result_ttl_s: Lifetime of job metadata, results and idempotency keys (s).
        visibility_timeout_s: Idle time after which another worker may claim an entry (s).
        max_done_jobs: Finished jobs kept; the oldest beyond are deleted with their results
            and idempotency key (``TRIBUNAL_MAX_DONE_JOBS``).
        max_dead_letters: Entries kept per dead-letter stream; the oldest beyond are dropped
            and counted (``TRIBUNAL_MAX_DEAD_LETTERS``).
        retry_after_s: Retry-After sent with ``QueueFull`` and ``QueueUnavailable`` (s).
        max_connections: Connections to Redis this process may hold.
        pool_timeout_s: How long a command waits for a free connection before it fails (s).
    """

    kind = "redis"

    def __init__(
        self,
        url: str,
        keys: Keys,
        *,
        max_queue_items: int,
        result_ttl_s: int,
        visibility_timeout_s: float,
        max_done_jobs: int = 20_000,
        max_dead_letters: int = 10_000,
        retry_after_s: float = 1.0,
        max_connections: int = 512,
        pool_timeout_s: float = 20.0,
    ) -> None:
        self.url = url
        self.max_done_jobs = max_done_jobs
        self.max_dead_letters = max_dead_letters
        self.keys = keys
        self.max_queue_items = max_queue_items
        self.result_ttl_s = result_ttl_s
        self.visibility_timeout_s = visibility_timeout_s
        self.retry_after_s = retry_after_s
        # A blocking pool: a burst of requests waits for a connection instead of failing
        # with "Too many connections" (redis-py's default pool refuses past 100). One retry
        # on a connection error, on a fresh connection: after Redis restarts, every pooled
        # connection is stale and would fail once (issue 7: 45 of 148 requests answered 503
        # after Redis was back). One only, so that a Redis that is really down is a 503 in
        # milliseconds; the submit script is idempotent, so its retry cannot enqueue twice.
        # health_check_interval PINGs a connection idle that long before using it.
        pool = aioredis.BlockingConnectionPool.from_url(
            url,
            max_connections=max_connections,
            timeout=pool_timeout_s,
            socket_connect_timeout=2.0,
            retry=Retry(ExponentialBackoff(cap=0.2, base=0.02), 1),
            retry_on_error=[RedisConnectionError, RedisTimeoutError, ConnectionResetError],
            health_check_interval=5,
            decode_responses=True,
        )
        self.redis: aioredis.Redis = aioredis.Redis.from_pool(pool)  # owns it: aclose closes it
        self._submit = self.redis.register_script(_SUBMIT)
        self._complete = self.redis.register_script(_COMPLETE)
        self._autoclaim_cursor: dict[tuple[str, str], str] = {}
        self._last_autoclaim: dict[tuple[str, str], float] = {}
        self._waiters: dict[str, set[asyncio.Event]] = {}
        self._listener: asyncio.Task[None] | None = None
        self._closing = False

    @contextlib.asynccontextmanager
    async def _unavailable_as_503(self) -> AsyncIterator[None]:
        try:
            yield
        except OutOfMemoryError as exc:
            # Redis at its maxmemory (noeviction): nothing is evicted, writes are refused.
            # Back-pressure, as for a full queue: finished jobs and cache entries expire.
            raise QueueFull(
                f"Redis at {self.url} is at its maxmemory and refuses writes ({exc}); retry "
                "later (operators: raise maxmemory or lower the stores' bounds, "
                "docs/operations.md)",
                retry_after_s=self.retry_after_s,
            ) from exc
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            raise QueueUnavailable(
                f"the queue is unavailable: Redis at {self.url} is not reachable ({exc})",
                retry_after_s=self.retry_after_s,
            ) from exc

    async def ping(self) -> None:
        """Raise ``QueueUnavailable`` unless Redis answers PING."""
        async with self._unavailable_as_503():
            await self.redis.ping()

    async def ensure_verifier(self, verifier: str) -> None:
        """Create the stream and its consumer group (reading from the start: ``0``)."""
        async with self._unavailable_as_503():
            try:
                await self.redis.xgroup_create(
                    self.keys.stream(verifier), CONSUMER_GROUP, id="0", mkstream=True
                )
            except ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise

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
            async with self._unavailable_as_503():
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

    async def job(self, job_id: str) -> JobRecord:
        """Return the stored job; raise ``JobNotFound`` when it never existed or expired."""
        async with self._unavailable_as_503(), self.redis.pipeline(transaction=False) as pipe:
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

    async def claim(
        self, verifier: str, consumer: str, count: int, block_s: float
    ) -> list[Delivery]:
        """Reclaim idle entries (every quarter visibility timeout, or on every claim while they
        come back in full batches), then read new ones."""
        try:
            return await self._claim(verifier, consumer, count, block_s)
        except ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            # Redis restarted without persistence (or the stream was deleted): the group is
            # gone. Recreate it; entries added since are read from the start.
            logger.warning("consumer group of %s is missing; recreating it", verifier)
            await self.ensure_verifier(verifier)
            return []

    async def _claim(
        self, verifier: str, consumer: str, count: int, block_s: float
    ) -> list[Delivery]:
        stream = self.keys.stream(verifier)
        deliveries: list[Delivery] = []
        async with self._unavailable_as_503():
            now = time.monotonic()
            slot = (verifier, consumer)
            if now - self._last_autoclaim.get(slot, 0.0) >= self.visibility_timeout_s / 4:
                deliveries += await self._reclaim(verifier, consumer, count)
                # While a dead worker's entries keep coming back in full batches, reclaim on
                # every claim: at the rate this worker scores, not one batch per quarter
                # visibility timeout (a 2,000-item job waited minutes).
                if len(deliveries) < count:
                    self._last_autoclaim[slot] = now
            wanted = count - len(deliveries)
            if wanted > 0:
                block_ms = None if deliveries else max(1, int(block_s * 1000))
                answer: Any = await self.redis.xreadgroup(
                    CONSUMER_GROUP, consumer, {stream: ">"}, count=wanted, block=block_ms
                )
                for _, entries in answer or []:
                    deliveries += [_delivery(eid, fields, 1) for eid, fields in entries if fields]
        return deliveries

    async def _reclaim(self, verifier: str, consumer: str, count: int) -> list[Delivery]:
        stream = self.keys.stream(verifier)
        slot = (verifier, consumer)
        cursor = self._autoclaim_cursor.get(slot, "0-0")
        answer = await self.redis.xautoclaim(
            stream,
            CONSUMER_GROUP,
            consumer,
            min_idle_time=int(self.visibility_timeout_s * 1000),
            start_id=cursor,
            count=count,
        )
        self._autoclaim_cursor[slot] = answer[0]
        entries = [(eid, fields) for eid, fields in answer[1] if fields]
        if not entries:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for eid, _ in entries:
                pipe.xpending_range(stream, CONSUMER_GROUP, min=eid, max=eid, count=1)
            pending = await pipe.execute()
        out = []
        for (eid, fields), info in zip(entries, pending, strict=True):
            times = int(info[0]["times_delivered"]) if info else 1
            out.append(_delivery(eid, fields, times))
        logger.info("reclaimed %d idle entries of %s", len(out), verifier)
        return out

    async def extend(self, verifier: str, consumer: str, entry_ids: Sequence[str]) -> None:
        """Reset the idle time of ``entry_ids`` (JUSTID: not counted as a delivery)."""
        await self._claim_again(verifier, consumer, entry_ids, idle_ms=None)

    async def release(self, verifier: str, consumer: str, entry_ids: Sequence[str]) -> None:
        """Set the entries' idle time past the visibility timeout (XCLAIM ... IDLE, JUSTID:
        not counted as a delivery), so that the next XAUTOCLAIM of any worker takes them."""
        idle_ms = int(self.visibility_timeout_s * 1000) + 1
        await self._claim_again(verifier, consumer, entry_ids, idle_ms=idle_ms)

    async def _claim_again(
        self, verifier: str, consumer: str, entry_ids: Sequence[str], idle_ms: int | None
    ) -> None:
        """XCLAIM ... JUSTID the entries to ``consumer`` with idle time ``idle_ms`` (None: 0)."""
        if not entry_ids:
            return
        async with self._unavailable_as_503():
            await self.redis.xclaim(
                self.keys.stream(verifier),
                CONSUMER_GROUP,
                consumer,
                min_idle_time=0,
                message_ids=list(entry_ids),
                idle=idle_ms,
                justid=True,
            )

    async def complete(
        self,
        verifier: str,
        done: Sequence[tuple[Delivery, str]],
        counters: Mapping[str, int] | None = None,
    ) -> None:
        """Write results first-wins, acknowledge and delete their entries and add
        ``counters`` to the stats: one script, one round trip."""
        if not done:
            return
        counters = counters or {}
        args: list[Any] = [
            CONSUMER_GROUP,
            self.result_ttl_s,
            self.keys.prefix,
            self.keys.done_channel,
            len(counters),
            time.time(),
            self.max_done_jobs,
        ]
        for name, amount in counters.items():
            args += [name, amount]
        for delivery, result in done:
            args += [delivery.entry_id, delivery.job_id, delivery.index, result]
        keys = [self.keys.stream(verifier), self.keys.stats(verifier)]
        async with self._unavailable_as_503():
            await self._complete(keys=keys, args=args)

    async def dead_letter(self, verifier: str, delivery: Delivery, reason: str) -> None:
        """Copy the entry, with its delivery count and the reason, to the dead-letter stream,
        which keeps the newest ``max_dead_letters`` (the count of every entry ever copied is
        the ``dead_lettered`` counter, so the dropped ones are counted too)."""
        async with self._unavailable_as_503(), self.redis.pipeline(transaction=False) as pipe:
            pipe.xadd(
                self.keys.dead_letters(verifier),
                {
                    "job": delivery.job_id,
                    "index": delivery.index,
                    "item": json.dumps(delivery.payload),
                    "deliveries": delivery.deliveries,
                    "reason": reason,
                },
                maxlen=self.max_dead_letters,
                approximate=False,
            )
            pipe.hincrby(self.keys.stats(verifier), "dead_lettered", 1)
            await pipe.execute()

    async def store_sizes(self, verifier: str) -> dict[str, int]:
        """Sizes of the bounded stores of ``verifier``: ``dead_letters`` (entries kept),
        ``dead_letters_dropped`` (oldest dropped past the cap, ever) and ``done_jobs``
        (finished jobs kept, every verifier's)."""
        async with self._unavailable_as_503(), self.redis.pipeline(transaction=False) as pipe:
            pipe.xlen(self.keys.dead_letters(verifier))
            pipe.hget(self.keys.stats(verifier), "dead_lettered")
            pipe.zcard(self.keys.done_jobs)
            kept, ever, done = await pipe.execute()
        return {
            "dead_letters": int(kept),
            "dead_letters_dropped": max(0, int(ever or 0) - int(kept)),
            "done_jobs": int(done),
        }

    async def memory_used(self) -> int | None:
        """Redis's ``used_memory`` (bytes)."""
        async with self._unavailable_as_503():
            info = await self.redis.info("memory")
        return int(info["used_memory"])

    async def check_memory_policy(self) -> None:
        """Refuse a Redis that may evict the queue's keys.

        Any ``maxmemory-policy`` but ``noeviction`` lets Redis delete keys when it is full:
        ``allkeys-*`` any key (a stream of queued items), ``volatile-*`` keys with a TTL
        (job results still being collected). Tribunal bounds its own stores instead.

        Raises:
            ConfigurationError: The policy could evict queue keys.
            QueueUnavailable: Redis does not answer.
        """
        async with self._unavailable_as_503():
            try:
                config = await self.redis.config_get("maxmemory-policy")
            except ResponseError as exc:  # CONFIG disabled or renamed (managed Redis)
                logger.warning(
                    "could not read Redis's maxmemory-policy (%s): make sure it is noeviction",
                    exc,
                )
                return
        policy = config.get("maxmemory-policy", "noeviction")
        if policy != "noeviction":
            raise ConfigurationError(
                f"Redis at {self.url} has maxmemory-policy {policy}: when full it may evict the "
                "queue's streams and job results (queued items lost). Set maxmemory-policy "
                "noeviction (redis-server --maxmemory-policy noeviction, or CONFIG SET); "
                "Tribunal bounds its own stores (TRIBUNAL_CACHE_MAX_ITEMS, "
                "TRIBUNAL_MAX_DONE_JOBS, TRIBUNAL_MAX_DEAD_LETTERS, TRIBUNAL_MAX_QUEUE_ITEMS)"
            )

    async def heartbeat(
        self,
        verifier: str,
        consumer: str,
        utilisation: tuple[int, int] | None = None,
        backend: tuple[int, int] | None = None,
    ) -> None:
        """Record the worker's heartbeat time (and its pool's and backend's load, as
        ``"busy capacity[ in_flight bound]"``)."""
        async with self._unavailable_as_503(), self.redis.pipeline(transaction=False) as pipe:
            pipe.zadd(self.keys.workers(verifier), {consumer: time.time()})
            if utilisation is not None or backend is not None:
                loads = [*(utilisation or (0, 0)), *(backend or ())]
                pipe.hset(self.keys.utilisation(verifier), consumer, " ".join(map(str, loads)))
            await pipe.execute()

    async def retire(self, verifier: str, consumer: str) -> None:
        """ZREM the worker's heartbeat."""
        async with self._unavailable_as_503(), self.redis.pipeline(transaction=False) as pipe:
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
        async with self._unavailable_as_503():
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
        async with self._unavailable_as_503(), self.redis.pipeline(transaction=False) as pipe:
            pipe.zremrangebyscore(key, "-inf", now - 3600)
            pipe.zcount(key, now - within_s, "+inf")
            _, live = await pipe.execute()
        return int(live)

    async def set_refusal(self, verifier: str, reason: str | None) -> None:
        """Record or clear the refusal (kept a week at most: it describes one deployment)."""
        key = self.keys.refusal(verifier)
        async with self._unavailable_as_503():
            if reason is None:
                await self.redis.delete(key)
            else:
                await self.redis.set(key, reason, ex=_REFUSAL_TTL_S)

    async def refusal(self, verifier: str) -> str | None:
        """Return the refusal."""
        async with self._unavailable_as_503():
            value = await self.redis.get(self.keys.refusal(verifier))
        return value.decode() if isinstance(value, bytes) else value

    async def depth(self, verifier: str) -> int:
        """XLEN of the stream: acknowledged entries are deleted, so this is the backlog."""
        async with self._unavailable_as_503():
            return int(await self.redis.xlen(self.keys.stream(verifier)))

    async def oldest_entry(self, verifier: str) -> str | None:
        """The first entry of the stream (acknowledged entries are deleted)."""
        async with self._unavailable_as_503():
            first = await self.redis.xrange(self.keys.stream(verifier), count=1)
        if not first:
            return None
        entry_id = first[0][0]
        return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)

    async def incr_stats(self, verifier: str, counters: Mapping[str, int]) -> None:
        """HINCRBY each counter."""
        if not counters:
            return
        async with self._unavailable_as_503(), self.redis.pipeline(transaction=False) as pipe:
            for name, amount in counters.items():
                pipe.hincrby(self.keys.stats(verifier), name, amount)
            await pipe.execute()

    async def stats(self, verifier: str) -> dict[str, int]:
        """HGETALL of the counters."""
        async with self._unavailable_as_503():
            raw = await self.redis.hgetall(self.keys.stats(verifier))
        return {str(k): int(v) for k, v in raw.items()}

    async def aclose(self) -> None:
        """Stop the listener and close the connection pool."""
        self._closing = True
        if self._listener is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._listener, 2.0)
        await self.redis.aclose()


def _delivery(entry_id: str, fields: Mapping[str, str], deliveries: int) -> Delivery:
    return Delivery(
        entry_id=entry_id,
        job_id=fields["job"],
        index=int(fields["index"]),
        payload=json.loads(fields["item"]),
        cache_key=fields.get("cache") or None,
        deliveries=deliveries,
    )
