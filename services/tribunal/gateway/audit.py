"""Audits: a second opinion on a sample of a spec's items, never answered to the trainer.

A spec with an ``audit`` block (``tribunal.gateway.specs.Audit``) names an auditor spec and
a rate. After the gateway has answered a batch, the items of the sampled GRPO groups are
scored again under the auditor (:class:`Auditor`), in a background task: the trainer's
answer never waits on it, a bound on the items pending drops (and counts) what does not fit,
and an auditor's failure is logged and counted, never raised.

Sampling is per group, deterministic: a group is audited when a hash of (the spec's hash,
the group id) falls below the rate (:func:`audited`), so every retry, API replica and worker
agrees, and a group is audited whole (an item without ``group_id`` is its own group).

Each audited pair (training reward, audit reward) is added to its **window**: the trainer's
step of its item (the item's ``trainer_step``, which a batch's or a job's optional ``step``
gives to its items) divided by ``window_steps``, or, for an item without one, the wall clock
divided by ``window_s``. Every spec item's hack signatures (``tribunal.gateway.signatures``)
are summed per window the same way (a spec without an audit has windows of
``tribunal.gateway.specs.WINDOW_STEPS`` steps or ``WINDOW_S`` seconds), in the same store.
A window of pairs keeps ``n``, the sums of both rewards, and the sum and sum of squares of
the paired differences ``d = reward - audit``, from which :func:`gap_interval` gives the gap
(mean of ``d``) and its 95 % normal interval on the paired differences,
``mean(d) ± 1.96 · sd(d) / sqrt(n)`` (sd with n - 1). The store (:class:`RedisAuditStore`
beside the Redis queue, :class:`MemoryAuditStore` with the embedded one) keeps the last
:data:`MAX_WINDOWS` windows (of pairs, and of signatures) and the last :data:`MAX_ITEMS`
pairs of each spec, and expires with :data:`TTL_S` after the last write: its size does not
grow with the number of items audited.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from operator import attrgetter
from typing import Any, Protocol

import orjson
import redis.asyncio as aioredis
from pydantic import ValidationError
from redis.exceptions import RedisError

from tribunal.core.inspection.store import StatsSink
from tribunal.core.metrics import MICRO, NANO, SEP
from tribunal.core.queue.base import JobQueue
from tribunal.core.queue.keys import Keys
from tribunal.core.queue.redis_streams import RedisStreamsQueue
from tribunal.gateway.budget import spend_key
from tribunal.gateway.signatures import (
    SIGNATURES,
    SignatureTally,
    batch_signatures,
    item_cost_usd,
)
from tribunal.gateway.specs import WINDOW_S, WINDOW_STEPS, LoadedSpec
from tribunal.wire.envelope import ItemOutcome, ScoreItem
from tribunal.wire.errors import QueueUnavailable
from tribunal.wire.gateway import VERIFIERS, GatewayItem, ItemAudit

logger = logging.getLogger(__name__)

MAX_WINDOWS = 1000
"""Windows kept per spec; the oldest (by first step or start time) go first."""

MAX_ITEMS = 1000
"""Audited pairs kept per spec (the newest), for the items that drive a gap."""

TTL_S = 7 * 24 * 3600
"""An audit store's keys expire this long after their spec's last audited pair (s)."""

LINGER_S = 0.25
"""How long an :class:`Auditor` gathers audited pairs before it writes them (s)."""

MAX_PENDING_ITEMS = 10_000
"""Items an :class:`Auditor` holds for scoring at once; more are dropped, counted."""

Z_95 = 1.959963984540054
"""The 97.5 % quantile of the standard normal: a two-sided 95 % interval."""


def audited(spec_hash: str, group: str, rate: float) -> bool:
    """Whether ``group`` of the spec with hash ``spec_hash`` is audited at ``rate``.

    Deterministic (blake2b of both, compared with ``rate · 2**64``): a retry, another
    replica or another worker decides the same, and a group is audited whole.
    """
    if rate >= 1.0:
        return True
    key = f"{spec_hash}\x00{group}".encode("utf-8", "surrogatepass")
    digest = hashlib.blake2b(key, digest_size=8).digest()
    return int.from_bytes(digest, "big") < rate * 2**64


def direct_name(verifier: str, auditor: str) -> str:
    """The name direct ``verifier`` items audited by spec ``auditor`` are aggregated under
    (their store keys, their ``spec`` label, ``GET /v1/audits``): ``@<verifier>><auditor>``,
    which no spec name (``[a-z0-9_]``) can be."""
    return f"@{verifier}>{auditor}"


def window_of(windows: tuple[int, float], step: int | None, now_s: float) -> tuple[str, float]:
    """The window of an item: its name and its order (the first step, or the start time).

    Args:
        windows: ``(steps, seconds)`` per window (``LoadedSpec.windows``).
        step: The item's trainer step, or None.
        now_s: The wall clock (epoch s).

    Returns:
        ``("step:<first step>", first step)`` for an item that carries a step,
        ``("time:<start, epoch s>", start)`` otherwise.
    """
    steps, seconds = windows
    if step is not None:
        first = step - step % steps
        return f"step:{first}", float(first)
    start = math.floor(now_s / seconds) * seconds
    return f"time:{start:g}", start


@dataclass(frozen=True)
class AuditPair:
    """One audited item: its training and audit rewards.

    Attributes:
        id: The item's id.
        group: Its group (``group_id``, or its id).
        step: The trainer's step of its batch, or None.
        window: Its window's name (:func:`window_of`).
        reward: What the trainer was answered.
        audit_reward: What the auditor gave (never sent to the trainer).
        policy_version: The policy that wrote it (the item's ``policy_version``, else its
            batch's), or None. Last, with a default: pairs stored before it read as None.
    """

    id: str
    group: str
    step: int | None
    window: str
    reward: float
    audit_reward: float
    policy_version: str | None = None


_ROW = attrgetter(*(f.name for f in fields(AuditPair)))
"""An :class:`AuditPair`'s fields as a tuple, in order (what the Redis store writes of it):
``dataclasses.astuple`` copies each field deeply, 25 times the cost (bench/audit_overhead.py)."""


@dataclass(frozen=True)
class GapInterval:
    """The gap between training and audit reward of a window, with its 95 % interval.

    Attributes:
        n: Pairs.
        reward: Mean training reward.
        audit_reward: Mean audit reward.
        gap: Mean of ``reward - audit_reward``.
        low: Lower end of the normal interval on the paired differences (None: n < 2).
        high: Upper end (None: n < 2).
    """

    n: int
    reward: float
    audit_reward: float
    gap: float
    low: float | None
    high: float | None


def gap_interval(sums: Mapping[str, float]) -> GapInterval:
    """The gap of a window from its sums ``{"n", "t", "a", "d", "d2"}`` (pairs, training
    rewards, audit rewards, differences, squared differences).

    The interval is ``mean(d) ± 1.96 · s / sqrt(n)``, with ``s`` the sample standard deviation
    of the differences (n - 1): a normal interval on paired differences (a paired z-interval;
    every pair shares its item, so the two rewards are not independent samples).

    Raises:
        ValueError: ``n`` is below 1.
    """
    n = int(sums["n"])
    if n < 1:
        raise ValueError("a window's gap needs at least one pair")
    mean = sums["d"] / n
    if n < 2:
        return GapInterval(n, sums["t"] / n, sums["a"] / n, mean, None, None)
    variance = max(0.0, (sums["d2"] - n * mean * mean) / (n - 1))
    half = Z_95 * math.sqrt(variance / n)
    return GapInterval(n, sums["t"] / n, sums["a"] / n, mean, mean - half, mean + half)


SigSums = Mapping[str, int]
"""A window's hack signature sums: ``items`` and each signature's sum (millionths, but
``length`` in characters; ``tribunal.gateway.signatures``)."""


class AuditStore(Protocol):
    """Where audited pairs are aggregated (per spec and window) and the newest kept."""

    async def add(self, spec: str, order: float, pairs: Sequence[AuditPair]) -> None:
        """Add ``pairs`` (all of one window, whose order is ``order``) to ``spec``'s record."""
        ...

    async def windows(self, spec: str) -> list[tuple[str, dict[str, float]]]:
        """``spec``'s windows, oldest first, each with its sums (:func:`gap_interval`)."""
        ...

    async def items(self, spec: str) -> list[AuditPair]:
        """``spec``'s newest audited pairs (at most :data:`MAX_ITEMS`), newest first."""
        ...

    async def add_signatures(self, spec: str, window: str, order: float, sums: SigSums) -> None:
        """Add a batch's hack signature sums (``{"items": n, "<signature>": sum}``) to
        ``spec``'s ``window``, whose order is ``order``."""
        ...

    async def signature_windows(self, spec: str) -> list[tuple[str, dict[str, int]]]:
        """``spec``'s signature windows, oldest first, each with its sums."""
        ...


def _sums(pairs: Sequence[AuditPair]) -> dict[str, float]:
    diffs = [p.reward - p.audit_reward for p in pairs]
    return {
        "n": float(len(pairs)),
        "t": sum(p.reward for p in pairs),
        "a": sum(p.audit_reward for p in pairs),
        "d": sum(diffs),
        "d2": sum(d * d for d in diffs),
    }


class MemoryAuditStore:
    """An :class:`AuditStore` in this process (the embedded queue's)."""

    def __init__(self) -> None:
        self._windows: dict[str, dict[str, tuple[float, dict[str, float]]]] = {}
        self._items: dict[str, deque[AuditPair]] = {}
        self._signatures: dict[str, dict[str, tuple[float, dict[str, int]]]] = {}

    async def add(self, spec: str, order: float, pairs: Sequence[AuditPair]) -> None:
        """See :class:`AuditStore`."""
        if not pairs:
            return
        windows = self._windows.setdefault(spec, {})
        _, sums = windows.setdefault(pairs[0].window, (order, dict.fromkeys("ntad", 0.0)))
        for name, value in _sums(pairs).items():
            sums[name] = sums.get(name, 0.0) + value
        while len(windows) > MAX_WINDOWS:
            del windows[min(windows, key=lambda w: windows[w][0])]
        self._items.setdefault(spec, deque(maxlen=MAX_ITEMS)).extendleft(pairs)

    async def windows(self, spec: str) -> list[tuple[str, dict[str, float]]]:
        """See :class:`AuditStore`."""
        known = self._windows.get(spec, {})
        return [(w, dict(s)) for w, (_, s) in sorted(known.items(), key=lambda kv: kv[1][0])]

    async def items(self, spec: str) -> list[AuditPair]:
        """See :class:`AuditStore`."""
        return list(self._items.get(spec, ()))

    async def add_signatures(self, spec: str, window: str, order: float, sums: SigSums) -> None:
        """See :class:`AuditStore`."""
        windows = self._signatures.setdefault(spec, {})
        _, kept = windows.setdefault(window, (order, {}))
        for name, value in sums.items():
            kept[name] = kept.get(name, 0) + value
        while len(windows) > MAX_WINDOWS:
            del windows[min(windows, key=lambda w: windows[w][0])]

    async def signature_windows(self, spec: str) -> list[tuple[str, dict[str, int]]]:
        """See :class:`AuditStore`."""
        known = self._signatures.get(spec, {})
        return [(w, dict(s)) for w, (_, s) in sorted(known.items(), key=lambda kv: kv[1][0])]


class RedisAuditStore:
    """An :class:`AuditStore` in Redis, beside the queue.

    Keys (under the queue's prefix): ``audit:<spec>:windows`` (a sorted set of window names
    by order), ``audit:<spec>:w:<window>`` (a hash of its sums, added with HINCRBYFLOAT, so
    that every API replica adds to the same window), ``audit:<spec>:items`` (a list of
    the newest pairs, trimmed to :data:`MAX_ITEMS`), and for the hack signatures
    ``audit:<spec>:sigwindows`` and ``audit:<spec>:s:<window>`` (integer sums, HINCRBY).
    """

    def __init__(self, redis: aioredis.Redis, keys: Keys) -> None:
        self._redis = redis
        self._prefix = f"{keys.prefix}:audit"

    def _key(self, spec: str, *parts: str) -> str:
        return ":".join((self._prefix, spec, *parts))

    async def add(self, spec: str, order: float, pairs: Sequence[AuditPair]) -> None:
        """See :class:`AuditStore`."""
        if not pairs:
            return
        window = pairs[0].window
        windows, sums_key = self._key(spec, "windows"), self._key(spec, "w", window)
        items = self._key(spec, "items")
        sums = _sums(pairs)
        async with self._redis.pipeline(transaction=False) as pipe:
            for name, value in sums.items():
                pipe.hincrbyfloat(sums_key, name, value)
            pipe.zadd(windows, {window: order})
            # A list per pair (the fields in order, _ROW): asdict() per pair was most of a write.
            pipe.lpush(items, *(orjson.dumps(_ROW(p)) for p in pairs))
            pipe.ltrim(items, 0, MAX_ITEMS - 1)
            pipe.zrange(windows, 0, -MAX_WINDOWS - 1)
            for key in (sums_key, windows, items):
                pipe.expire(key, TTL_S)
            answers = await pipe.execute()
        stale = answers[len(sums) + 3]
        if stale:
            names = [w.decode() if isinstance(w, bytes) else str(w) for w in stale]
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.zrem(windows, *names)
                pipe.delete(*(self._key(spec, "w", n) for n in names))
                await pipe.execute()

    async def windows(self, spec: str) -> list[tuple[str, dict[str, float]]]:
        """See :class:`AuditStore`."""
        names = await self._window_names(self._key(spec, "windows"))
        async with self._redis.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.hgetall(self._key(spec, "w", name))
            answers = await pipe.execute()
        out = []
        for name, raw in zip(names, answers, strict=True):
            if raw:
                out.append((name, {_text(k): float(v) for k, v in raw.items()}))
        return out

    async def _window_names(self, key: str) -> list[str]:
        """The window names of the sorted set ``key``, by order."""
        return [
            w.decode() if isinstance(w, bytes) else str(w)
            for w in await self._redis.zrange(key, 0, -1)
        ]

    async def items(self, spec: str) -> list[AuditPair]:
        """See :class:`AuditStore`."""
        raw = await self._redis.lrange(self._key(spec, "items"), 0, MAX_ITEMS - 1)
        return [AuditPair(*orjson.loads(r)) for r in raw]

    async def add_signatures(self, spec: str, window: str, order: float, sums: SigSums) -> None:
        """See :class:`AuditStore`."""
        windows, sums_key = self._key(spec, "sigwindows"), self._key(spec, "s", window)
        async with self._redis.pipeline(transaction=False) as pipe:
            for name, value in sums.items():
                pipe.hincrby(sums_key, name, value)
            pipe.zadd(windows, {window: order})
            pipe.zrange(windows, 0, -MAX_WINDOWS - 1)
            for key in (sums_key, windows):
                pipe.expire(key, TTL_S)
            answers = await pipe.execute()
        stale = answers[len(sums) + 1]
        if stale:
            names = [_text(w) for w in stale]
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.zrem(windows, *names)
                pipe.delete(*(self._key(spec, "s", n) for n in names))
                await pipe.execute()

    async def signature_windows(self, spec: str) -> list[tuple[str, dict[str, int]]]:
        """See :class:`AuditStore`."""
        names = await self._window_names(self._key(spec, "sigwindows"))
        async with self._redis.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.hgetall(self._key(spec, "s", name))
            answers = await pipe.execute()
        return [
            (name, {_text(k): int(v) for k, v in raw.items()})
            for name, raw in zip(names, answers, strict=True)
            if raw
        ]


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def build_audit_store(queue: JobQueue) -> AuditStore:
    """The store beside ``queue``: in Redis with the Redis queue, else in this process."""
    if isinstance(queue, RedisStreamsQueue):
        return RedisAuditStore(queue.redis, queue.keys)
    return MemoryAuditStore()


class Scorer(Protocol):
    """What an :class:`Auditor` needs from the gateway: its specs, its item model, and
    scoring a batch of spec items (``GatewayVerifier``)."""

    specs: dict[str, LoadedSpec]
    item_model: type[ScoreItem]

    async def score_outcomes(self, items: Sequence[ScoreItem]) -> Sequence[Any]:
        """One outcome (with ``reward``) per item, in order, never audited itself."""
        ...


SignatureRow = tuple[str, str, Any, "str | ItemOutcome", int | None]
"""A spec item as the signatures read it: (spec, group, response, result, trainer step)."""


_Pending = tuple[GatewayItem, float, str | None]
"""An item chosen for audit: the item, its training reward and its policy version."""


def _signature_tally(
    rows: list[SignatureRow],
    now_s: float,
    windows: Mapping[str, tuple[int, float]],
    format_terms: Mapping[str, Mapping[str, bool]],
    citing: set[str],
) -> SignatureTally:
    """:func:`batch_signatures` of rows whose results are JSON text or outcomes, each in the
    window of its step (or of ``now_s``) under its spec's ``windows`` (in a thread)."""
    parsed = []
    placed: dict[tuple[str, int | None], tuple[str, float]] = {}
    for spec, group, response, text, step in rows:
        details = (
            text.details if isinstance(text, ItemOutcome) else orjson.loads(text).get("details")
        )
        where = placed.get((spec, step))
        if where is None:
            where = placed[(spec, step)] = window_of(windows[spec], step, now_s)
        parsed.append((spec, group, response, details if isinstance(details, dict) else {}, *where))
    return batch_signatures(parsed, format_terms, citing)


class Auditor:
    """Scores the sampled groups of answered batches again, under each spec's auditor.

    Args:
        scorer: The gateway's verifier (scores the auditor spec's items through the
            verifiers, as any spec item).
        store: Where pairs are aggregated.
        timeout_s: Bound on one batch's audit (s); past it the audit fails, counted.
        max_pending_items: Items held for scoring at once; more are dropped, counted.
        stats_sink: Where the counters go after each audit (the gateway's cluster-wide
            stats, ``JobQueue.incr_stats``); None: they wait for :meth:`take_stats`.

    ``counters`` holds, since the last :meth:`take_stats`, per spec: ``audit|<spec>|items``
    (pairs recorded), ``|failed`` (items whose audit failed: the auditor answered an error,
    timed out or could not be reached), ``|dropped`` (past the bound), ``|reward`` /
    ``|audit_reward`` (sums of the recorded pairs' rewards, in millionths) and ``|squares``
    (the sum of their squared differences, in millionths): ``tribunal_audit_*`` in /metrics.
    """

    def __init__(
        self,
        scorer: Scorer,
        store: AuditStore,
        timeout_s: float = 60.0,
        max_pending_items: int = MAX_PENDING_ITEMS,
        stats_sink: StatsSink | None = None,
    ) -> None:
        self._sink = stats_sink
        self._scorer = scorer
        self.store = store
        self._timeout_s = timeout_s
        self._max_pending = max_pending_items
        self._pending = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self.counters: dict[str, int] = {}
        self._buffer: dict[tuple[str, str], tuple[float, list[AuditPair]]] = {}
        self._signature_buffer: dict[tuple[str, str], tuple[float, dict[str, int]]] = {}
        self._one_thread = asyncio.Semaphore(1)
        self._flusher: asyncio.Task[None] | None = None

    def _count(self, spec: str, what: str, amount: int = 1) -> None:
        name = f"audit{SEP}{spec}{SEP}{what}"
        self.counters[name] = self.counters.get(name, 0) + amount

    def take_stats(self) -> dict[str, int]:
        """The counters since the last take (added to the gateway's cluster-wide stats)."""
        taken, self.counters = self.counters, {}
        return taken

    def after(
        self,
        items: Sequence[ScoreItem],
        results: Sequence[str | ItemOutcome],
        step: int | None,
        now_s: float | None = None,
        policy_version: str | None = None,
        audit: ItemAudit | None = None,
    ) -> None:
        """Start auditing the sampled items of an answered batch, and counting every spec
        item's hack signatures (``tribunal.gateway.signatures``); returns at once.

        Args:
            items: The batch's valid items, in order.
            results: Their ``ItemResult`` JSON texts, as answered (only the sampled ones are
                read: an item that was answered an error is not audited), or their outcomes
                (the gateway's worker, scoring jobs).
            step: The batch's trainer step, or None: the step of each item that carries no
                ``trainer_step`` of its own (an item without either is windowed by time).
            now_s: The wall clock (epoch s) for time windows; None: now.
            policy_version: The batch's policy, recorded with the audited pairs of its items
                that carry none of their own.
            audit: The batch's auditor, for its ``verifier`` items that name none of their
                own (a spec item is audited as its spec says); None: only their own.
        """
        now = time.time() if now_s is None else now_s
        chosen: dict[tuple[str, str, int | None], list[_Pending]] = {}
        decided: dict[tuple[str, str, str], bool] = {}
        specs = self._scorer.specs
        rows: list[SignatureRow] = []
        for item, text in zip(items, results, strict=True):
            if not isinstance(item, GatewayItem):
                continue
            own = item.trainer_step
            at = step if own is None else own
            name = item.spec
            key = item.group_id or item.id
            if name is not None:
                extra = item.__pydantic_extra__ or {}
                rows.append((name, key, extra.get("response"), text, at))
                loaded = specs[name]
                if (spec_audit := loaded.spec.audit) is None:
                    continue
                auditor, rate, seed = spec_audit.spec, spec_audit.rate, loaded.hash
            elif (own_audit := item.audit or audit) is not None:  # a direct verifier item's
                auditor, rate = own_audit.spec, own_audit.rate
                name = seed = direct_name(str(item.verifier), auditor)
            else:
                continue
            group = (name, auditor, key)
            sampled = decided.get(group)
            if sampled is None:  # one hash per group, not per item
                sampled = decided[group] = audited(seed, key, rate)
            if not sampled:
                continue
            reward = (
                text.reward if isinstance(text, ItemOutcome) else orjson.loads(text).get("reward")
            )
            if isinstance(reward, (int, float)) and math.isfinite(reward):
                version = item.policy_version or policy_version
                chosen.setdefault((name, auditor, at), []).append((item, float(reward), version))
        if rows:
            self._signatures(rows, now)
        for (spec, auditor, at), pairs in chosen.items():
            if self._pending + len(pairs) > self._max_pending:
                self._count(spec, "dropped", len(pairs))
                logger.warning(
                    "audit of %d items of spec %s dropped: bound reached", len(pairs), spec
                )
                continue
            self._pending += len(pairs)
            task = asyncio.create_task(self._audit(spec, auditor, pairs, at, now))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _audit(
        self, spec: str, auditor: str, pairs: list[_Pending], step: int | None, now: float
    ) -> None:
        loaded = self._scorer.specs.get(spec)  # None: "@<verifier>><auditor>", direct items
        windows = (WINDOW_STEPS, WINDOW_S) if loaded is None else loaded.windows
        window, order = window_of(windows, step, now)
        try:
            batch = [
                self._scorer.item_model.model_validate(
                    {**item.fields(), "id": item.id, "spec": auditor}
                    | ({"group_id": item.group_id} if item.group_id else {})
                )
                for item, _, _ in pairs
            ]
            # asyncio.timeout, not wait_for: wait_for wraps the call in a task of its own.
            async with asyncio.timeout(self._timeout_s):
                outcomes = await self._scorer.score_outcomes(batch)
            # What the auditor spent is charged to its own spec (its budget, its metric).
            cost = sum(item_cost_usd(o.details)[0] for o in outcomes)
            self.counters[spend_key(auditor)] = self.counters.get(spend_key(auditor), 0) + round(
                cost * NANO
            )
            kept = []
            for (item, reward, version), outcome in zip(pairs, outcomes, strict=True):
                if outcome.reward is None:
                    self._count(spec, "failed")
                    continue
                group = item.group_id or item.id
                kept.append(
                    AuditPair(item.id, group, step, window, reward, outcome.reward, version)
                )
            self._buffer.setdefault((spec, window), (order, []))[1].extend(kept)
            self._flush_soon()
        except (TimeoutError, ValidationError, OSError) as exc:
            self._count(spec, "failed", len(pairs))
            logger.warning("audit of %d items of spec %s failed: %r", len(pairs), spec, exc)
        except Exception:  # an auditor's bug is logged and counted, never raised
            self._count(spec, "failed", len(pairs))
            logger.exception("audit of %d items of spec %s failed", len(pairs), spec)
        finally:
            self._pending -= len(pairs)
        await self._send_stats()

    def _signatures(self, rows: list[SignatureRow], now: float) -> None:
        """Count the batch's hack signatures (``tribunal.gateway.signatures``) in a thread,
        one batch at a time; past the bound on items pending, they are dropped, counted."""
        if self._pending + len(rows) > self._max_pending:
            for spec in {r[0] for r in rows}:
                self._count(spec, "signatures_dropped", sum(r[0] == spec for r in rows))
            return
        self._pending += len(rows)
        task = asyncio.create_task(self._count_signatures(rows, now))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _count_signatures(self, rows: list[SignatureRow], now: float) -> None:
        specs = self._scorer.specs
        names = {r[0] for r in rows}
        windows = {n: specs[n].windows for n in names}
        terms = {n: t for n in names if (t := specs[n].format_terms) is not None}
        citing = {n for n in names if "citation" in specs[n].verifiers()}
        try:
            async with self._one_thread:
                tally = await asyncio.to_thread(_signature_tally, rows, now, windows, terms, citing)
            for name, value in tally.counters.items():
                self.counters[name] = self.counters.get(name, 0) + value
            for key, (order, sums) in tally.windows.items():
                _, kept = self._signature_buffer.setdefault(key, (order, {}))
                for name, value in sums.items():
                    kept[name] = kept.get(name, 0) + value
            self._flush_soon()
        except Exception:  # a signature's bug is logged, never raised
            logger.exception("hack signatures of %d items not counted", len(rows))
        finally:
            self._pending -= len(rows)
        await self._send_stats()

    def _flush_soon(self) -> None:
        """Start the task that writes what was gathered after :data:`LINGER_S`, unless one
        is waiting."""
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_later())
            self._tasks.add(self._flusher)
            self._flusher.add_done_callback(self._tasks.discard)

    async def _send_stats(self) -> None:
        if self._sink is not None and self.counters:
            with contextlib.suppress(QueueUnavailable):  # a queue outage costs the counts
                await self._sink("gateway", self.take_stats())

    async def _flush_later(self) -> None:
        """Write what the audits gathered over :data:`LINGER_S` in one write per window:
        one Redis round trip per window and linger, not one per batch (a trainer may send a
        group per request)."""
        await asyncio.sleep(LINGER_S)
        # Until nothing is left: pairs added while a write was awaited find this task still
        # running and start none of their own.
        while self._buffer or self._signature_buffer:
            buffered, self._buffer = self._buffer, {}
            for (spec, _), (order, kept) in buffered.items():
                await self._store_pairs(spec, order, kept)
            signed, self._signature_buffer = self._signature_buffer, {}
            for (spec, window), (order, sums) in signed.items():
                try:
                    await self.store.add_signatures(spec, window, order, sums)
                except (RedisError, OSError) as exc:  # /metrics still has them
                    logger.warning(
                        "hack signatures of %d items of spec %s not stored: %r",
                        sums.get("items", 0),
                        spec,
                        exc,
                    )
            await self._send_stats()

    async def _store_pairs(self, spec: str, order: float, kept: list[AuditPair]) -> None:
        try:
            await self.store.add(spec, order, kept)
        except (RedisError, OSError) as exc:
            self._count(spec, "failed", len(kept))
            logger.warning("audit of %d items of spec %s not stored: %r", len(kept), spec, exc)
            return
        self._count(spec, "items", len(kept))
        self._count(spec, "reward", round(sum(p.reward for p in kept) * MICRO))
        self._count(spec, "audit_reward", round(sum(p.audit_reward for p in kept) * MICRO))
        squares = sum((p.reward - p.audit_reward) ** 2 for p in kept)
        self._count(spec, "squares", round(squares * MICRO))

    async def drain(self) -> None:
        """Wait for the audits in flight (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def aclose(self) -> None:
        """Cancel the audits in flight."""
        for task in list(self._tasks):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*list(self._tasks), return_exceptions=True)


async def report(scorer: Scorer, store: AuditStore, top: int = 20) -> list[dict[str, Any]]:
    """Per audited spec: its auditor, rate, windows (training and audit reward, gap and its
    interval, :func:`gap_interval`) and the ``top`` newest pairs with the largest
    ``reward - audit_reward``, for ``GET /v1/audits``; then per verifier and auditor that
    direct items named (:func:`direct_name`, with the rate null: each item names its own),
    once audited."""
    audits: list[tuple[str, str, float | None]] = [
        (name, loaded.spec.audit.spec, loaded.spec.audit.rate)
        for name, loaded in sorted(scorer.specs.items())
        if loaded.spec.audit is not None
    ]
    audits += [(direct_name(v, s), s, None) for v in VERIFIERS for s in sorted(scorer.specs)]
    out = []
    for name, auditor, rate in audits:
        direct = rate is None
        windows = [
            {"window": window, **asdict(gap_interval(sums))}
            for window, sums in await store.windows(name)
            if sums.get("n", 0) >= 1
        ]
        if direct and not windows:
            continue
        pairs = await store.items(name)
        driving = sorted(pairs, key=lambda p: p.reward - p.audit_reward, reverse=True)[:top]
        out.append(
            {
                "spec": name,
                "auditor": auditor,
                "rate": rate,
                "windows": windows,
                "items": [asdict(p) for p in driving if p.reward > p.audit_reward],
            }
        )
    return out


async def signature_report(
    scorer: Scorer, store: AuditStore, spent: Mapping[str, float] | None = None
) -> list[dict[str, Any]]:
    """Per spec with signature windows: its window size and, per window (oldest first), the
    items counted, the mean of each hack signature (``length`` in characters, the others
    in [0, 1]; ``format_share`` only for a spec with a format-only component), ``cost_usd``
    (what the window's items spent on model calls, USD) and ``unpriced`` (its items with
    unpriced model calls); per spec ``cost_usd`` (all it spent: ``spent``, from the gateway's
    stats; None when not given) and ``budget_usd``; for ``GET /v1/signatures``."""
    out = []
    for name, loaded in sorted(scorer.specs.items()):
        windows = []
        for window, sums in await store.signature_windows(name):
            n = sums.get("items", 0)
            if n < 1:
                continue
            means = {
                signature: sums[signature] / (n if signature == "length" else n * MICRO)
                for signature in SIGNATURES
                if signature in sums
            }
            costs = {"cost_usd": sums.get("cost", 0) / NANO, "unpriced": sums.get("unpriced", 0)}
            windows.append({"window": window, "items": n, **means, **costs})
        if windows:
            steps, seconds = loaded.windows
            out.append(
                {
                    "spec": name,
                    "window_steps": steps,
                    "window_s": seconds,
                    "cost_usd": None if spent is None else spent.get(name, 0.0),
                    "budget_usd": loaded.spec.budget_usd,
                    "windows": windows,
                }
            )
    return out
