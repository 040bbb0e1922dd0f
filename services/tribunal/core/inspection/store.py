"""The reward inspector's record: a capped, sampled, expiring log of scored items.

Each kept item is one *record*: the item as queued and its ``ItemResult``, with its job,
index and queue entry id (which says when it was enqueued). With Redis the records live
beside the queue, in one stream per verifier (``Keys.inspect``) of one entry per written
batch (a JSON array of its records), with a count of the items it holds and the size of
each batch (``Keys.inspect_count``, ``Keys.inspect_sizes``). An item's inspector id is its
batch's entry id and its place in it (``<ms>-<seq>.<k>``; the milliseconds are when it was
kept). Each write drops the oldest batches, whole, until at most
``TRIBUNAL_INSPECT_MAX_ITEMS`` items are left, then the batches older than
``TRIBUNAL_INSPECT_TTL_S``, and the three keys expire that long after the last write, so
the cap and the TTL bound what Redis holds. The embedded queue keeps the same in this
process, one item at a time.

The list, the filters and the charts read a small *summary* of each record (ids, reward,
error class, latency, rubric verdicts, a hash of the response), made by :func:`summarize`
in the process that reads, once per record: a store remembers the summaries it has made and
fetches only the entries newer than its newest. A worker's share of the work is one JSON
encoding of each batch's records and one script call per batch.

Workers write through :class:`InspectRecorder` after their results are written (never
before: the trainer waits on the results, not on the inspector), one write in flight at a
time with what came meanwhile buffered, and dropped, counted, past a bound. A record is
encoded with orjson; one orjson refuses (an integer past 64 bits, a lone surrogate: values
the JSON layer, ``tribunal.wire.jsonparse``, accepts) is encoded with ``json`` instead, and
one neither can encode (nesting past Python's recursion limit) is dropped alone, counted:
never its batch. Every drop is added to ``tribunal_inspect_dropped`` in ``/metrics``.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import logging
import re
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import orjson
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from tribunal.core.offload import off_loop_if_large
from tribunal.core.queue.base import Delivery, JobQueue
from tribunal.core.queue.keys import Keys
from tribunal.core.queue.redis_streams import RedisStreamsQueue
from tribunal.core.settings import CoreSettings
from tribunal.wire.errors import QueueUnavailable
from tribunal.wire.jsonparse import loads as json_loads

logger = logging.getLogger(__name__)

StatsSink = Callable[[str, Mapping[str, int]], Awaitable[None]]
"""Adds to a verifier's cluster-wide counters (``JobQueue.incr_stats``)."""

MAX_BUFFERED = 10_000
"""Items a recorder holds while its previous write is in flight; more are dropped (counted)."""

LINGER_S = 0.25
"""How long a recorder gathers items before a write (s)."""

# KEYS: the verifier's stream, its item count and its batches' sizes (a list of "<entry id>
# <items>", oldest first); ARGV: cap (items), TTL (ms), the batch's item count and its
# records as one JSON array. A stream entry is a batch: one XADD per write, not one per item,
# and trimming reads the sizes, never a batch (Redis's time per item kept went from ~3 us to
# ~0.2 us). The oldest batches go whole while the count passes the cap or they are older
# than the TTL.
_ADD = """
local key, count, sizes = KEYS[1], KEYS[2], KEYS[3]
local cap, ttl = tonumber(ARGV[1]), tonumber(ARGV[2])
local id = redis.call('XADD', key, '*', 'r', ARGV[4])
redis.call('RPUSH', sizes, id .. ' ' .. ARGV[3])
local total = redis.call('INCRBY', count, ARGV[3])
local now = redis.call('TIME')
local before = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) - ttl
while true do
  local head = redis.call('LINDEX', sizes, 0)
  if not head then break end
  local oldest, n = string.match(head, '^(%S+) (%d+)$')
  if total <= cap and tonumber(string.match(oldest, '^(%d+)')) >= before then break end
  redis.call('XDEL', key, oldest)
  redis.call('LPOP', sizes)
  total = total - tonumber(n)
end
redis.call('SET', count, total, 'PX', ttl)
redis.call('PEXPIRE', key, ttl)
redis.call('PEXPIRE', sizes, ttl)
return total
"""

_READ_PAGE = 1000
"""Entries one XRANGE of a summary refresh reads."""


class InspectStore(Protocol):
    """Where kept items live: Redis beside the queue, or this process's memory."""

    max_items: int
    ttl_s: int

    async def add(self, verifier: str, records: Sequence[dict[str, Any]], size: int = 0) -> int:
        """Keep ``records`` (:func:`keep`'s, oldest first), dropping what passes the cap or
        the TTL; return how many of ``records`` could not be encoded (not kept).

        ``size`` is the bytes of their items' JSON (their deliveries' ``size``): past
        ``core.offload.INLINE_BYTES`` they are encoded off the event loop (a 16 MiB item's
        encoding held a worker's loop long enough to lose its claims)."""
        ...

    async def summaries(self, verifier: str) -> list[dict[str, Any]]:
        """Every kept summary of ``verifier`` (:func:`summarize`), newest first. They are
        shared with later calls: read them, never change them."""
        ...

    async def record(self, verifier: str, rid: str) -> dict[str, Any] | None:
        """The whole record ``rid`` (``{"summary", "item", "result"}``), or None when it is
        gone (trimmed or expired) or never was."""
        ...

    async def size(self, verifier: str) -> int:
        """Entries kept for ``verifier`` now."""
        ...


def _rid_ms(rid: str) -> int:
    head = rid.partition("-")[0]
    return int(head) if head.isdigit() else 0


class _Summaries:
    """Summaries made so far, oldest first, bounded like the record they come from."""

    def __init__(self, max_items: int, ttl_s: int) -> None:
        self.max_items = max_items
        self.ttl_ms = ttl_s * 1000
        self.by_rid: dict[str, OrderedDict[str, dict[str, Any]]] = {}

    def of(self, verifier: str) -> OrderedDict[str, dict[str, Any]]:
        return self.by_rid.setdefault(verifier, OrderedDict())

    def newest(self, verifier: str) -> str | None:
        kept = self.of(verifier)
        return next(reversed(kept)) if kept else None

    def listing(self, verifier: str) -> list[dict[str, Any]]:
        kept = self.of(verifier)
        while len(kept) > self.max_items:
            kept.popitem(last=False)
        oldest = time.time() * 1000 - self.ttl_ms
        while kept and _rid_ms(next(iter(kept))) < oldest:
            kept.popitem(last=False)
        return list(reversed(kept.values()))


class RedisInspectStore:
    """Kept items in Redis (see the module docstring for the layout).

    Args:
        redis: The queue's client.
        keys: The queue's key names.
        max_items: Items kept per verifier.
        ttl_s: Lifetime of an item (s).
    """

    def __init__(self, redis: aioredis.Redis, keys: Keys, max_items: int, ttl_s: int) -> None:
        self.redis = redis
        self.keys = keys
        self.max_items = max_items
        self.ttl_s = ttl_s
        self._summaries = _Summaries(max_items, ttl_s)
        self._newest_entry: dict[str, str] = {}
        self._add = redis.register_script(_ADD)

    async def add(self, verifier: str, records: Sequence[dict[str, Any]], size: int = 0) -> int:
        """See :class:`InspectStore`."""
        records = records[-self.max_items :]  # a batch larger than the cap keeps its newest
        if not records:
            return 0
        batch, kept = await off_loop_if_large(size, _encode_batch, records)
        if kept:
            keys = [
                self.keys.inspect(verifier),
                self.keys.inspect_count(verifier),
                self.keys.inspect_sizes(verifier),
            ]
            await self._add(keys=keys, args=[self.max_items, self.ttl_s * 1000, kept, batch])
        return len(records) - kept

    async def summaries(self, verifier: str) -> list[dict[str, Any]]:
        """See :class:`InspectStore`."""
        key = self.keys.inspect(verifier)
        kept = self._summaries.of(verifier)
        newest = self._newest_entry.get(verifier)
        start = "-" if newest is None else f"({newest}"
        while True:
            entries: Any = await self.redis.xrange(key, min=start, max="+", count=_READ_PAGE)
            for entry_id, fields in entries:
                for k, record in enumerate(_loads(fields["r"])):
                    rid = f"{entry_id}.{k}"
                    kept[rid] = summarize(rid, record)
                self._newest_entry[verifier] = entry_id
            if len(entries) < _READ_PAGE:
                return self._summaries.listing(verifier)
            start = f"({entries[-1][0]}"

    async def record(self, verifier: str, rid: str) -> dict[str, Any] | None:
        """See :class:`InspectStore`."""
        entry_id, _, k = rid.partition(".")
        if not _ENTRY.fullmatch(entry_id) or not k.isdigit():
            return None
        if _rid_ms(rid) < time.time() * 1000 - self.ttl_s * 1000:
            return None
        key = self.keys.inspect(verifier)
        entries: Any = await self.redis.xrange(key, min=entry_id, max=entry_id)
        if not entries:
            return None
        records = _loads(entries[0][1]["r"])
        return _whole(rid, records[int(k)]) if int(k) < len(records) else None

    async def size(self, verifier: str) -> int:
        """See :class:`InspectStore`."""
        return int(await self.redis.get(self.keys.inspect_count(verifier)) or 0)


def _encode_batch(records: Sequence[dict[str, Any]]) -> tuple[bytes, int]:
    """``records`` as one JSON array, and how many it holds (those that cannot be encoded
    are left out)."""
    try:
        return orjson.dumps(records), len(records)  # the common case: one call
    except orjson.JSONEncodeError:
        encoded = [e for e in encode_records(records) if e is not None]
        return b"[" + b",".join(encoded) + b"]", len(encoded)


def encode_records(records: Sequence[dict[str, Any]]) -> list[bytes | None]:
    """Encode each record (:func:`keep`'s) as JSON; None for one that cannot be.

    orjson first; where it refuses a value that ``json``
    accepts (an integer past 64 bits, a lone surrogate), that record's item is encoded with
    ``json`` and spliced in (ASCII, lone surrogates escaped; read back by
    :func:`tribunal.wire.jsonparse.loads`). A record neither can encode (nested past the
    recursion limit) is None: the caller drops it and counts it, never its batch.
    """
    return [_encode_one(record) for record in records]


def _encode_one(record: dict[str, Any]) -> bytes | None:
    try:
        return orjson.dumps(record)
    except orjson.JSONEncodeError:
        pass
    try:
        item = orjson.Fragment(json.dumps(record.get("item")))
        return orjson.dumps({**record, "item": item})
    except (orjson.JSONEncodeError, ValueError, TypeError, RecursionError):
        return None


def dump_json(value: Any) -> bytes:
    """``value`` as JSON: orjson's, or ``json``'s (ASCII) for what orjson refuses.

    Raises:
        ValueError: Not even ``json`` can encode it (the store never keeps such a record).
    """
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        return json.dumps(value).encode()


def _loads(data: str | bytes) -> Any:
    """A stored batch or record: what ``json`` reads (orjson where that is exact)."""
    return json_loads(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)


_ENTRY = re.compile(r"[0-9]{1,20}-[0-9]{1,20}")
"""A stream entry id: anything else never reaches XRANGE."""


class MemoryInspectStore:
    """Kept items in this process (the embedded queue): the same cap and TTL; ids are
    ``<ms>-<seq>`` as Redis's, so that links and ordering read the same."""

    def __init__(self, max_items: int, ttl_s: int) -> None:
        self.max_items = max_items
        self.ttl_s = ttl_s
        self._entries: dict[str, OrderedDict[str, bytes]] = {}
        self._summaries = _Summaries(max_items, ttl_s)
        self._seq = itertools.count()

    def _live(self, verifier: str) -> OrderedDict[str, bytes]:
        entries = self._entries.setdefault(verifier, OrderedDict())
        oldest = time.time() * 1000 - self.ttl_s * 1000
        while entries and _rid_ms(next(iter(entries))) < oldest:
            entries.popitem(last=False)
        return entries

    async def add(self, verifier: str, records: Sequence[dict[str, Any]], size: int = 0) -> int:
        """See :class:`InspectStore`."""
        encoded = await off_loop_if_large(size, encode_records, records)
        entries = self._live(verifier)
        for one in encoded:
            if one is not None:
                entries[f"{int(time.time() * 1000)}-{next(self._seq)}"] = one
        while len(entries) > self.max_items:
            entries.popitem(last=False)
        return encoded.count(None)

    async def summaries(self, verifier: str) -> list[dict[str, Any]]:
        """See :class:`InspectStore`."""
        kept = self._summaries.of(verifier)
        newest = self._summaries.newest(verifier)
        after = (-1, -1, -1) if newest is None else rid_order(newest)
        fresh = []
        for rid, record in reversed(self._live(verifier).items()):
            if rid_order(rid) <= after:
                break
            fresh.append((rid, record))
        for rid, record in reversed(fresh):
            kept[rid] = summarize(rid, _loads(record))
        return self._summaries.listing(verifier)

    async def record(self, verifier: str, rid: str) -> dict[str, Any] | None:
        """See :class:`InspectStore`."""
        found = self._live(verifier).get(rid)
        return None if found is None else _whole(rid, _loads(found))

    async def size(self, verifier: str) -> int:
        """See :class:`InspectStore`."""
        return len(self._live(verifier))


def rid_order(rid: str) -> tuple[int, int, int]:
    """Sort key of an inspector id (``<ms>-<seq>`` of a batch's entry, ``.<k>`` its item)."""
    entry, _, k = rid.partition(".")
    ms, _, seq = entry.partition("-")
    return (
        int(ms) if ms.isdigit() else 0,
        int(seq) if seq.isdigit() else 0,
        int(k) if k.isdigit() else 0,
    )


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
    digest = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).digest()
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


def keep(delivery: Delivery, result_json: str, verifier: str) -> dict[str, Any]:
    """The record of one scored item, ready for ``orjson.dumps`` (``result_json``: its
    ``ItemResult``, spliced in as it is): a store encodes a batch's records in one call,
    so the item itself is all that a worker encodes again."""
    return {
        "verifier": verifier,
        "job": delivery.job_id,
        "index": delivery.index,
        "entry": delivery.entry_id,
        "item": delivery.payload,
        "result": orjson.Fragment(result_json),
    }


def summarize(rid: str, record: Mapping[str, Any]) -> dict[str, Any]:
    """The summary of the record kept as ``rid``: what the list, filters and charts read.

    Keys: ``rid``, ``t`` (when kept, unix s), ``verifier``, ``id``, ``group``, ``job``,
    ``index``, ``spec``, ``scorer`` (the verifier or ``spec:<name>`` that produced the
    result), ``reward``, ``error`` (its class), ``latency_ms`` (enqueued to kept; None on the
    embedded queue), ``cached``, ``response_hash`` (blake2b-64 of the response, to count
    identical completions) and ``rubrics`` (``[label, verdict]`` of every rubric judged).
    """
    item = record.get("item") or {}
    result = record.get("result") or {}
    error = result.get("error") or {}
    kept_ms = _rid_ms(rid)
    enqueued = _enqueued_ms(str(record.get("entry", "")))
    response = _response_text(item)
    spec = item.get("spec")
    return {
        "rid": rid,
        "t": kept_ms / 1000,
        "verifier": record.get("verifier"),
        "id": result.get("id"),
        "group": item.get("group_id"),
        "job": record.get("job"),
        "index": record.get("index"),
        "spec": spec if isinstance(spec, str) else None,
        "scorer": (result.get("verifier") or {}).get("name"),
        "reward": result.get("reward"),
        "error": error.get("code"),
        "latency_ms": None if not isinstance(enqueued, int) else max(0, kept_ms - enqueued),
        "cached": bool(result.get("cached")),
        "response_hash": None
        if response is None
        else hashlib.blake2b(response.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest(),
        "rubrics": list(_rubric_verdicts(result.get("details"))),
    }


def _whole(rid: str, record: dict[str, Any]) -> dict[str, Any]:
    """A record as the detail view and the export give it: summary, item, result."""
    return {
        "summary": summarize(rid, record),
        "item": record.get("item"),
        "result": record.get("result"),
    }


def _sample_key(delivery: Delivery) -> str:
    """What an item is drawn by: its GRPO group within its job, or else itself."""
    group = delivery.payload.get("group_id")
    return f"{delivery.job_id}:g:{group}" if group else f"{delivery.job_id}:{delivery.index}"


class InspectRecorder:
    """Keeps a sample of one verifier's scored items for the inspector, off the scoring path.

    :meth:`record` returns at once; a write gathers what came within ``linger_s`` of its first
    item, one write is in flight at a time, and what comes meanwhile is written by the next
    (past ``MAX_BUFFERED`` items waiting, new ones are dropped). A store that fails loses
    those items, never a result; a record that cannot be encoded loses itself alone. Every
    item dropped is counted in ``dropped`` and added, with the next write, to the counter
    ``inspect_dropped`` of ``stats`` (the queue's ``incr_stats``: ``/metrics`` reports it).

    Args:
        store: Where to keep them.
        verifier: The verifier whose items these are.
        sample_rate: Share kept, in (0, 1]; drawn per GRPO group (see :func:`sampled`).
        linger_s: How long a write waits for more items (s).
        stats: Where drops are counted (``JobQueue.incr_stats``), or None.
    """

    def __init__(
        self,
        store: InspectStore,
        verifier: str,
        sample_rate: float,
        linger_s: float = LINGER_S,
        stats: StatsSink | None = None,
    ) -> None:
        self.store = store
        self.verifier = verifier
        self.sample_rate = sample_rate
        self.linger_s = linger_s
        self.stats = stats
        self.dropped = 0
        """Items dropped since the start (buffer full, store failure, not encodable)."""
        self._uncounted = 0
        self._buffer: list[tuple[Delivery, str]] = []
        self._writer: asyncio.Task[None] | None = None

    def record(self, done: Sequence[tuple[Delivery, str]]) -> None:
        """Keep the sampled part of ``done`` (entries and their ``ItemResult`` JSON)."""
        rate = self.sample_rate
        kept = done if rate >= 1.0 else [(d, r) for d, r in done if sampled(_sample_key(d), rate)]
        room = MAX_BUFFERED - len(self._buffer)
        self._buffer += kept[:room]
        self._drop(max(0, len(kept) - room))
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

    def _drop(self, n: int) -> None:
        self.dropped += n
        self._uncounted += n

    async def _drain(self) -> None:
        while self._buffer:
            # Results come a few at a time (each as its pool task ends): a call per handful
            # cost the math worker 8 % more CPU per item (bench/inspect_overhead.py). The page
            # refreshes every 3 s, so a short wait gathers a write's worth.
            await asyncio.sleep(self.linger_s)
            done, self._buffer = self._buffer, []
            try:
                records = [keep(delivery, result, self.verifier) for delivery, result in done]
                size = sum(delivery.size + len(result) for delivery, result in done)
                if unencodable := await self.store.add(self.verifier, records, size):
                    logger.warning("inspector: %d items not kept: not encodable", unencodable)
                    self._drop(unencodable)
            except (RedisError, OSError, ValueError, TypeError) as exc:
                logger.warning("inspector: %d items not kept: %s", len(done), exc)
                self._drop(len(done))
            await self._count_drops()

    async def _count_drops(self) -> None:
        """Add the drops not yet counted to ``stats`` (kept for the next write if the queue
        is down)."""
        n, self._uncounted = self._uncounted, 0
        if not n or self.stats is None:
            return
        try:
            await self.stats(self.verifier, {"inspect_dropped": n})
        except (QueueUnavailable, RedisError, OSError):
            self._uncounted += n

    async def aclose(self) -> None:
        """Wait for the write in flight (a worker stopping keeps what it scored last)."""
        if self._writer is not None:
            try:
                await self._writer
            except Exception:
                logger.warning("the inspector's last write failed", exc_info=True)


def recorder_for(
    settings: CoreSettings, store: InspectStore, verifier: str, stats: StatsSink | None = None
) -> InspectRecorder | None:
    """A recorder for ``verifier`` that counts its drops in ``stats`` (the queue's
    ``incr_stats``), or None when ``TRIBUNAL_INSPECT_SAMPLE_RATE`` is 0."""
    if settings.inspect_sample_rate <= 0:
        return None
    return InspectRecorder(store, verifier, settings.inspect_sample_rate, stats=stats)
