"""The Redis Streams queue: one stream per verifier, one consumer group, results per job.

Workers read with XREADGROUP, keep their entries with a heartbeat (XCLAIM ... JUSTID resets
the idle time without counting a delivery) and pick up the entries of dead workers with
XAUTOCLAIM once those have been idle for the visibility timeout. Completion is one Lua script
(first result wins per item index, then XACK and XDEL, and a publish on the done channel when
the job's last result lands).

:class:`RedisStreamsQueue` is the whole backend: this module's :class:`RedisWorkStream` with
the job store (``redis_jobs``), the worker registry (``redis_workers``) and the counters
(``redis_stats``) on one connection (``redis_connection``).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from redis.exceptions import ResponseError

from tribunal.core.offload import off_loop_if_large
from tribunal.core.queue.base import Delivery
from tribunal.core.queue.keys import CONSUMER_GROUP, Keys
from tribunal.core.queue.redis_connection import RedisConnection
from tribunal.core.queue.redis_jobs import KEEP_DONE, RedisJobStore
from tribunal.core.queue.redis_stats import RedisQueueStats
from tribunal.core.queue.redis_workers import RedisWorkerRegistry

logger = logging.getLogger(__name__)

_COMPLETE = (
    KEEP_DONE
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
  local results = results_key(prefix, job_id)
  if redis.call('HSETNX', results, index, result) == 1 then
    redis.call('EXPIRE', results, ttl)
    local total = redis.call('HGET', job_key(prefix, job_id), 'total')
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


class RedisWorkStream(RedisConnection):
    """``WorkStream`` on Redis Streams: one stream and consumer group per verifier.

    Attributes read (set by the queue that composes it): ``result_ttl_s``,
    ``visibility_timeout_s``, ``max_done_jobs``, ``max_dead_letters``.
    """

    claim_cancellable = False
    result_ttl_s: int
    visibility_timeout_s: float
    max_done_jobs: int
    max_dead_letters: int

    def _start_stream(self) -> None:
        self._complete = self.redis.register_script(_COMPLETE)
        self._autoclaim_cursor: dict[tuple[str, str], str] = {}
        self._last_autoclaim: dict[tuple[str, str], float] = {}

    async def ensure_verifier(self, verifier: str) -> None:
        """Create the stream and its consumer group (reading from the start: ``0``)."""
        async with self.unavailable_as_503():
            try:
                await self.redis.xgroup_create(
                    self.keys.stream(verifier), CONSUMER_GROUP, id="0", mkstream=True
                )
            except ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise

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
        async with self.unavailable_as_503():
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
                entries = [(eid, f, 1) for _, read in answer or [] for eid, f in read if f]
                deliveries += await _deliveries(entries)
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
        out = await _deliveries(
            [
                (eid, fields, int(info[0]["times_delivered"]) if info else 1)
                for (eid, fields), info in zip(entries, pending, strict=True)
            ]
        )
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
        async with self.unavailable_as_503():
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
        async with self.unavailable_as_503():
            await self._complete(keys=keys, args=args)

    async def dead_letter(self, verifier: str, delivery: Delivery, reason: str) -> None:
        """Copy the entry, with its delivery count and the reason, to the dead-letter stream,
        which keeps the newest ``max_dead_letters`` (the count of every entry ever copied is
        the ``dead_lettered`` counter, so the dropped ones are counted too)."""
        async with self.unavailable_as_503(), self.redis.pipeline(transaction=False) as pipe:
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

    async def depth(self, verifier: str) -> int:
        """XLEN of the stream: acknowledged entries are deleted, so this is the backlog."""
        async with self.unavailable_as_503():
            return int(await self.redis.xlen(self.keys.stream(verifier)))

    async def oldest_entry(self, verifier: str) -> str | None:
        """The first entry of the stream (acknowledged entries are deleted)."""
        async with self.unavailable_as_503():
            first = await self.redis.xrange(self.keys.stream(verifier), count=1)
        if not first:
            return None
        entry_id = first[0][0]
        return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)


class RedisStreamsQueue(RedisJobStore, RedisWorkStream, RedisWorkerRegistry, RedisQueueStats):
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
        super().__init__(
            url,
            keys,
            retry_after_s=retry_after_s,
            max_connections=max_connections,
            pool_timeout_s=pool_timeout_s,
        )
        self.max_queue_items = max_queue_items
        self.result_ttl_s = result_ttl_s
        self.visibility_timeout_s = visibility_timeout_s
        self.max_done_jobs = max_done_jobs
        self.max_dead_letters = max_dead_letters
        self._start_jobs()
        self._start_stream()


async def _deliveries(entries: list[tuple[str, Mapping[str, str], int]]) -> list[Delivery]:
    """The claimed ``(entry id, fields, times delivered)`` as deliveries, their items parsed
    off the event loop where they are large (``core.offload``)."""
    size = sum(len(fields["item"]) for _, fields, _ in entries)
    return await off_loop_if_large(size, _parse, entries)


def _parse(entries: list[tuple[str, Mapping[str, str], int]]) -> list[Delivery]:
    return [
        Delivery(
            entry_id=entry_id,
            job_id=fields["job"],
            index=int(fields["index"]),
            payload=json.loads(fields["item"]),
            cache_key=fields.get("cache") or None,
            deliveries=deliveries,
            size=len(fields["item"]),
        )
        for entry_id, fields, deliveries in entries
    ]
