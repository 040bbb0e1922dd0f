"""The reward inspector's record: a capped, sampled, expiring log of scored items.

Each kept item is two values: a small *summary* (ids, reward, error class, latency, the
rubric verdicts, a hash of the response) that the list, the filters and the charts read,
and the whole *record* (the item as queued and its ``ItemResult``) that the detail view and
the export read. With Redis they live beside the queue: the summaries in one stream per
verifier (``Keys.inspect``; its entry id, ``<ms>-<seq>``, is the item's inspector id and
its time), each record in a string of its own (``Keys.inspect_record``) that expires with
the TTL and is deleted when the cap trims its entry, all in one Lua script, so that the cap
and the TTL bound what Redis holds. The embedded queue keeps the same in this process.

Workers write through :class:`InspectRecorder` after their results are written (never
before: the trainer waits on the results, not on the inspector), one write in flight at a
time with what came meanwhile buffered, and dropped, counted, past a bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from tribunal.core.queue.base import Delivery, JobQueue
from tribunal.core.queue.keys import Keys
from tribunal.core.queue.redis_streams import RedisStreamsQueue
from tribunal.core.settings import CoreSettings

logger = logging.getLogger(__name__)

# KEYS[1] the verifier's stream; ARGV: cap, ttl (ms), record key prefix, then summary and
# record of each item. Entries past the cap go oldest first with their records; entries older
# than the TTL are trimmed (their records expire on their own, with the same TTL).
_ADD = """
local stream, cap, ttl, prefix = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
for i = 4, #ARGV, 2 do
  local id = redis.call('XADD', stream, '*', 's', ARGV[i])
  redis.call('SET', prefix .. id, ARGV[i + 1], 'PX', ttl)
end
local n = redis.call('XLEN', stream)
if n > cap then
  for _, entry in ipairs(redis.call('XRANGE', stream, '-', '+', 'COUNT', n - cap)) do
    redis.call('DEL', prefix .. entry[1])
  end
  redis.call('XTRIM', stream, 'MAXLEN', cap)
end
local now = redis.call('TIME')
local oldest = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) - ttl
redis.call('XTRIM', stream, 'MINID', tostring(oldest))
redis.call('PEXPIRE', stream, ttl)
return n
"""

MAX_BUFFERED = 10_000
"""Items a recorder holds while its previous write is in flight; more are dropped (counted)."""


@dataclass(frozen=True)
class Kept:
    """One item as the recorder hands it to a store: its summary and whole record (JSON)."""

    summary: bytes
    record: bytes


class InspectStore(Protocol):
    """Where kept items live: Redis beside the queue, or this process's memory."""

    max_items: int
    ttl_s: int

    async def add(self, verifier: str, kept: Sequence[Kept]) -> None:
        """Keep ``kept`` (oldest first), dropping what passes the cap or the TTL."""
        ...

    async def summaries(self, verifier: str) -> list[dict[str, Any]]:
        """Every kept summary of ``verifier``, newest first, each with its ``rid``."""
        ...

    async def record(self, verifier: str, rid: str) -> dict[str, Any] | None:
        """The whole record ``rid`` (``{"summary", "item", "result"}``), or None when it is
        gone (trimmed or expired) or never was."""
        ...

    async def size(self, verifier: str) -> int:
        """Entries kept for ``verifier`` now."""
        ...


class RedisInspectStore:
    """Kept items in Redis (see the module docstring for the layout).

    Args:
        redis: The queue's client.
        keys: The queue's key names.
        max_items: Entries kept per verifier.
        ttl_s: Lifetime of an entry (s).
    """

    def __init__(self, redis: aioredis.Redis, keys: Keys, max_items: int, ttl_s: int) -> None:
        self.redis = redis
        self.keys = keys
        self.max_items = max_items
        self.ttl_s = ttl_s
        self._add = redis.register_script(_ADD)

    async def add(self, verifier: str, kept: Sequence[Kept]) -> None:
        """See :class:`InspectStore`."""
        args: list[Any] = [
            self.max_items,
            self.ttl_s * 1000,
            self.keys.inspect_record(verifier, ""),
        ]
        for one in kept:
            args += [one.summary, one.record]
        await self._add(keys=[self.keys.inspect(verifier)], args=args)

    async def summaries(self, verifier: str) -> list[dict[str, Any]]:
        """See :class:`InspectStore`."""
        entries: Any = await self.redis.xrevrange(self.keys.inspect(verifier), count=self.max_items)
        return [_with_rid(entry_id, fields["s"]) for entry_id, fields in entries]

    async def record(self, verifier: str, rid: str) -> dict[str, Any] | None:
        """See :class:`InspectStore`."""
        if not _RID_CHARS.issuperset(rid):
            return None
        raw = await self.redis.get(self.keys.inspect_record(verifier, rid))
        if raw is None:
            return None
        record: dict[str, Any] = orjson.loads(raw)
        record["summary"]["rid"] = rid
        return record

    async def size(self, verifier: str) -> int:
        """See :class:`InspectStore`."""
        return int(await self.redis.xlen(self.keys.inspect(verifier)))


_RID_CHARS = frozenset("0123456789-")


def _with_rid(rid: str, summary: str | bytes) -> dict[str, Any]:
    value: dict[str, Any] = orjson.loads(summary)
    value["rid"] = rid
    return value


class MemoryInspectStore:
    """Kept items in this process (the embedded queue): the same cap and TTL; ids are
    ``<ms>-<seq>`` as Redis's, so that links and ordering read the same."""

    def __init__(self, max_items: int, ttl_s: int) -> None:
        self.max_items = max_items
        self.ttl_s = ttl_s
        self._entries: dict[str, OrderedDict[str, tuple[float, bytes, bytes]]] = {}
        self._seq = itertools.count()

    def _live(self, verifier: str) -> OrderedDict[str, tuple[float, bytes, bytes]]:
        entries = self._entries.setdefault(verifier, OrderedDict())
        oldest = time.time() - self.ttl_s
        while entries and next(iter(entries.values()))[0] < oldest:
            entries.popitem(last=False)
        return entries

    async def add(self, verifier: str, kept: Sequence[Kept]) -> None:
        """See :class:`InspectStore`."""
        entries = self._live(verifier)
        for one in kept:
            now = time.time()
            entries[f"{int(now * 1000)}-{next(self._seq)}"] = (now, one.summary, one.record)
        while len(entries) > self.max_items:
            entries.popitem(last=False)

    async def summaries(self, verifier: str) -> list[dict[str, Any]]:
        """See :class:`InspectStore`."""
        entries = self._live(verifier)
        return [_with_rid(rid, summary) for rid, (_, summary, _) in reversed(entries.items())]

    async def record(self, verifier: str, rid: str) -> dict[str, Any] | None:
        """See :class:`InspectStore`."""
        found = self._live(verifier).get(rid)
        if found is None:
            return None
        record: dict[str, Any] = orjson.loads(found[2])
        record["summary"]["rid"] = rid
        return record

    async def size(self, verifier: str) -> int:
        """See :class:`InspectStore`."""
        return len(self._live(verifier))


def build_inspect_store(settings: CoreSettings, queue: JobQueue) -> InspectStore:
    """The store beside ``queue``: in Redis with the Redis queue, else in this process."""
    if isinstance(queue, RedisStreamsQueue):
        return RedisInspectStore(
            queue.redis, queue.keys, settings.inspect_max_items, settings.inspect_ttl_s
        )
    return MemoryInspectStore(settings.inspect_max_items, settings.inspect_ttl_s)


def sampled(key: str, rate: float) -> bool:
    """Whether the item or group ``key`` is kept at ``rate``: a hash of the key, so that
    every worker decides the same for a group (a GRPO group is kept whole or not at all)."""
    if rate >= 1.0:
        return True
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") < rate * 2**64


def _response_text(item: Mapping[str, Any]) -> str | None:
    for name in ("response", "code", "query"):
        value = item.get(name)
        if isinstance(value, str):
            return value
    return None


def _rubric_verdicts(details: Any) -> Iterable[tuple[str, str | None]]:
    """``(label, verdict)`` of every rubric in a result's details, a spec's components'
    included (the per-rubric "share met" chart reads them from the summaries)."""
    if not isinstance(details, dict):
        return
    rubrics = details.get("rubrics")
    if isinstance(rubrics, list):
        for rubric in rubrics:
            if isinstance(rubric, dict):
                label = rubric.get("title") or rubric.get("text") or ""
                yield str(label)[:200], rubric.get("verdict")
    subs = details.get("sub_rewards")
    if isinstance(subs, dict):
        for sub in subs.values():
            if isinstance(sub, dict):
                yield from _rubric_verdicts(sub.get("details"))


def _enqueued_ms(entry_id: str) -> int | None:
    """When a Redis stream entry was added (its id is ``<ms>-<seq>``); None for the embedded
    queue's counters."""
    head = entry_id.partition("-")[0]
    return int(head) if head.isdigit() and len(head) >= 12 else None


def keep(delivery: Delivery, result_json: str, verifier: str, now_s: float) -> Kept:
    """Build what is kept of one scored item (``result_json``: its ``ItemResult``)."""
    result = orjson.loads(result_json)
    item = delivery.payload
    error = result.get("error") or {}
    enqueued = _enqueued_ms(delivery.entry_id)
    response = _response_text(item)
    spec = item.get("spec")
    summary = {
        "t": now_s,
        "verifier": verifier,
        "id": result.get("id"),
        "group": item.get("group_id"),
        "job": delivery.job_id,
        "index": delivery.index,
        "spec": spec if isinstance(spec, str) else None,
        "scorer": (result.get("verifier") or {}).get("name"),
        "reward": result.get("reward"),
        "error": error.get("code"),
        "latency_ms": None if enqueued is None else max(0, round(now_s * 1000) - enqueued),
        "cached": bool(result.get("cached")),
        "response_hash": None
        if response is None
        else hashlib.blake2b(response.encode(), digest_size=8).hexdigest(),
        "rubrics": list(_rubric_verdicts(result.get("details"))),
    }
    record = orjson.dumps(
        {"summary": summary, "item": item, "result": orjson.Fragment(result_json)}
    )
    return Kept(orjson.dumps(summary), record)


class InspectRecorder:
    """Keeps a sample of one verifier's scored items for the inspector, off the scoring path.

    :meth:`record` returns at once; one write is in flight at a time, and what comes meanwhile
    is written by the next (past ``MAX_BUFFERED`` items waiting, new ones are dropped and
    counted in ``dropped``). A store that fails loses those items, never a result.

    Args:
        store: Where to keep them.
        verifier: The verifier whose items these are.
        sample_rate: Share kept, in (0, 1]; drawn per GRPO group (see :func:`sampled`).
    """

    def __init__(self, store: InspectStore, verifier: str, sample_rate: float) -> None:
        self.store = store
        self.verifier = verifier
        self.sample_rate = sample_rate
        self.dropped = 0
        self._buffer: list[tuple[Delivery, str]] = []
        self._writer: asyncio.Task[None] | None = None

    def record(self, done: Sequence[tuple[Delivery, str]]) -> None:
        """Keep the sampled part of ``done`` (entries and their ``ItemResult`` JSON)."""
        rate = self.sample_rate
        for delivery, result in done:
            group = delivery.payload.get("group_id")
            key = f"{delivery.job_id}:g:{group}" if group else f"{delivery.job_id}:{delivery.index}"
            if not sampled(key, rate):
                continue
            if len(self._buffer) >= MAX_BUFFERED:
                self.dropped += 1
                continue
            self._buffer.append((delivery, result))
        if self._buffer and (self._writer is None or self._writer.done()):
            self._writer = asyncio.create_task(self._drain())

    def record_request(
        self, items: Sequence[Any], results: Sequence[str], started_s: float
    ) -> None:
        """Keep the sampled part of a batch scored in the API process without the queue (the
        gateway's synchronous routes): ``items`` as the request sent them, ``results`` their
        ``ItemResult`` JSON. The batch is keyed as a job ``sync-<16 hex>`` (no ``/v1/jobs``
        id: the queue never saw it) and its latency counts from ``started_s`` (unix s)."""
        job = f"sync-{uuid.uuid4().hex[:16]}"
        # An entry id in the queue's format, its time when the request was accepted.
        entry_id = f"{int(started_s * 1000)}-0"
        self.record(
            [
                (Delivery(entry_id, job, i, item if isinstance(item, dict) else {}, None, 1), r)
                for i, (item, r) in enumerate(zip(items, results, strict=True))
            ]
        )

    async def _drain(self) -> None:
        while self._buffer:
            done, self._buffer = self._buffer, []
            now = time.time()
            try:
                kept = [keep(delivery, result, self.verifier, now) for delivery, result in done]
                await self.store.add(self.verifier, kept)
            except (RedisError, OSError, ValueError) as exc:
                logger.warning("inspector: %d items not kept: %s", len(done), exc)

    async def aclose(self) -> None:
        """Wait for the write in flight (a worker stopping keeps what it scored last)."""
        if self._writer is not None:
            with contextlib.suppress(Exception):
                await self._writer


def recorder_for(
    settings: CoreSettings, store: InspectStore, verifier: str
) -> InspectRecorder | None:
    """A recorder for ``verifier``, or None when ``TRIBUNAL_INSPECT_SAMPLE_RATE`` is 0."""
    if settings.inspect_sample_rate <= 0:
        return None
    return InspectRecorder(store, verifier, settings.inspect_sample_rate)
