"""The worker runtime: claim, dedupe, score, write, acknowledge, heartbeat.

A worker process holds up to ``concurrency × batch_size`` items at once and claims more as
soon as a batch's worth of room frees up, so its verifier always has work queued (claiming
continuously, not in lock-step batches that each wait for their slowest item). Each claimed
batch answers dead letters and cache hits at once and scores each distinct input once (the
identical completions of a GRPO group are one call). A verifier that scores items
independently (``score_item``, see ``tribunal.core.verifier``) gets every item as its own
call: an item's result is written as soon as it is ready and its room goes to the next
claim, so one slow item holds back only itself. Results ready together are written together
(one Redis call while the previous write is in flight), and every entry is acknowledged
with its result.

While an item is being scored its entry is kept from other workers by a heartbeat; if the
process dies, it is claimed by another worker after the visibility timeout, and after
``max_deliveries`` it becomes a ``dead_letter`` error. Results are first-wins per item, so
an item scored twice still yields one result.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from pydantic import ValidationError

from tribunal.core.cache import ResultCache
from tribunal.core.inspection.store import InspectRecorder
from tribunal.core.metrics import LATENCY_BUCKETS_S, Tally, entry_age_s
from tribunal.core.offload import off_loop_if_large
from tribunal.core.queue.base import Delivery, JobQueue
from tribunal.core.verifier import (
    ReportsBackend,
    ReportsPool,
    ScoresEachItem,
    ServesCompanion,
    TakesStats,
    Verifier,
    score_guarded,
    verifier_info,
)
from tribunal.wire.envelope import ItemOutcome, ScoreItem, result_json
from tribunal.wire.errors import (
    BadInput,
    DeadLettered,
    InternalError,
    QueueUnavailable,
    TribunalError,
)

logger = logging.getLogger(__name__)

T = TypeVar("T")

Written = tuple[Delivery, str]
"""An entry and its result, serialised as an ``ItemResult``."""


def consumer_name() -> str:
    """Return a consumer name unique to this process: ``host:pid:random``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def _finite(outcome: ItemOutcome, verifier: str) -> ItemOutcome:
    """The outcome, or an ``internal_error`` in place of a NaN or infinite reward.

    The last guard of "a failure is never a reward": JSON has no NaN, so a non-finite reward
    would reach the client as ``null`` with no error, or be clipped into a false 0 by a
    caller, and the cache would keep it.
    """
    if outcome.reward is None or math.isfinite(outcome.reward):
        return outcome
    logger.error("the %s verifier produced a non-finite reward %r", verifier, outcome.reward)
    error = InternalError(
        f"the {verifier} verifier produced a non-finite reward ({outcome.reward!r}); "
        "no reward given"
    )
    return ItemOutcome.failed(error, outcome.details)


def pool_utilisation(verifier: Verifier) -> tuple[int, int] | None:
    """``(busy, capacity)`` of the verifier's pool, if it has one (``ReportsPool``: a
    verifier that waits on a remote model has no pool of its own)."""
    return verifier.utilisation() if isinstance(verifier, ReportsPool) else None


def backend_load(verifier: Verifier) -> tuple[int, int] | None:
    """``(in flight, bound)`` of the verifier's LLM backend, if it has one
    (``ReportsBackend``)."""
    return verifier.backend_load() if isinstance(verifier, ReportsBackend) else None


def verifier_stats(verifier: Verifier) -> dict[str, int]:
    """The counters the verifier tallied since it was last asked (``TakesStats``: its
    backend calls, a gateway's spec rewards)."""
    return verifier.take_stats() if isinstance(verifier, TakesStats) else {}


async def call_verifier(verifier: Verifier, items: list[ScoreItem]) -> list[ItemOutcome]:
    """``verifier.score(items)``, one outcome per item, in order, whatever it does.

    A ``TribunalError`` raised for the whole batch becomes every item's error; a crash (a
    bug, logged with its traceback), a wrong number of outcomes or a non-finite reward
    becomes ``internal_error``: a failure is never a reward.
    """
    started = time.perf_counter()
    try:
        outcomes = await verifier.score(items)
    except TribunalError as exc:
        logger.exception("verifier %s failed a whole batch", verifier.name)
        return [ItemOutcome.failed(exc)] * len(items)
    except Exception:
        logger.exception("verifier %s crashed on a batch", verifier.name)
        error = InternalError(f"the {verifier.name} verifier crashed; see its logs")
        return [ItemOutcome.failed(error)] * len(items)
    if len(outcomes) != len(items):
        logger.error(
            "verifier %s returned %d outcomes for %d items",
            verifier.name,
            len(outcomes),
            len(items),
        )
        error = InternalError(
            f"the {verifier.name} verifier returned {len(outcomes)} outcomes for {len(items)} items"
        )
        return [ItemOutcome.failed(error)] * len(items)
    outcomes = [_finite(outcome, verifier.name) for outcome in outcomes]
    logger.debug("scored %d items in %.1f ms", len(items), (time.perf_counter() - started) * 1000)
    return outcomes


@dataclass
class BatchScoring:
    """What a batch needs to answer and score its entries (where the results go is its
    ``ResultSink``): the verifier, the queue's dead-letter stream, the cache, and the
    rendering of a result with its counters.

    Args:
        verifier: The verifier.
        queue: The job queue (for dead letters).
        cache: The result cache.
        max_deliveries: Deliveries after which an entry is dead-lettered.
        tally: The worker's tally: item latencies and cache misses, written with its next
            write.
    """

    verifier: Verifier
    queue: JobQueue
    cache: ResultCache
    max_deliveries: int
    tally: Tally

    def __post_init__(self) -> None:
        self.info = verifier_info(self.verifier)

    async def dead_letter(self, delivery: Delivery, reason: str) -> None:
        """Move ``delivery`` to the dead-letter stream; a queue outage is logged (its result,
        a ``dead_letter`` error, is written all the same)."""
        try:
            await self.queue.dead_letter(self.verifier.name, delivery, reason)
        except QueueUnavailable as exc:
            logger.warning("dead-lettering %s failed: %s", delivery.entry_id, exc.message)

    async def cached(self, keys: list[str]) -> list[str | None]:
        """The cached outcomes (JSON) of ``keys``, None where absent; all None if the cache
        does not answer (a cache outage costs speed, never results)."""
        try:
            return await self.cache.get_many(keys)
        except Exception:
            logger.warning("result cache unavailable; scoring without it", exc_info=True)
            return [None] * len(keys)

    def render(
        self,
        delivery: Delivery,
        outcome: ItemOutcome,
        counters: dict[str, int],
        *,
        cached: bool = False,
    ) -> str:
        """The entry's ``ItemResult`` as JSON; counts it in ``counters`` (``scored`` or
        ``error:<code>``) and its latency in the tally."""
        label = f"error:{outcome.error.code}" if outcome.error else "scored"
        counters[label] = counters.get(label, 0) + 1
        age = entry_age_s(delivery.entry_id)
        if age is not None:
            self.tally.observe("latency", age, LATENCY_BUCKETS_S)
        item_id = str(delivery.payload.get("id", delivery.index))
        return result_json(item_id, outcome, self.info, cached=cached)


class ResultSink(Protocol):
    """Where a batch hands its results: the worker, which writes them and gives their room
    to the next claim."""

    def accept(self, ready: Ready) -> None:
        """Take ``ready`` (non-empty) for writing; its items are no longer held."""
        ...


@dataclass
class WorkerRuntime:
    """Scores the queued items of one verifier.

    Args:
        verifier: The verifier (already started).
        queue: The job queue.
        cache: The result cache.
        batch_size: Most entries claimed per read.
        concurrency: Batches' worth of items held at once: up to ``concurrency × batch_size``
            items claimed and not yet scored.
        max_deliveries: Deliveries after which an entry is dead-lettered.
        heartbeat_s: Period of the liveness heartbeat and of the hold on claimed entries (s).
        block_s: How long one claim waits for entries (s).
        grace_s: At stop, how long items in progress may take before they are released (s).
        write_attempts: Tries (1 s apart) to write results through a queue outage.
        recorder: Keeps a sample of the written results for the reward inspector, or None.
    """

    verifier: Verifier
    queue: JobQueue
    cache: ResultCache
    batch_size: int = 64
    concurrency: int = 4
    max_deliveries: int = 3
    heartbeat_s: float = 2.0
    block_s: float = 1.0
    grace_s: float = 8.0
    write_attempts: int = 10
    consumer: str = field(default_factory=consumer_name)
    recorder: InspectRecorder | None = None

    def __post_init__(self) -> None:
        self.info = verifier_info(self.verifier)
        self.capacity = self.concurrency * self.batch_size
        # A claim is one Redis round trip: claiming only once a batch's worth of room is free
        # (half the capacity when it holds a single batch) keeps claims few under load while
        # the verifier, with the rest of the capacity queued, never runs dry.
        self._low_water = max(1, min(self.batch_size, self.capacity // 2))
        # Entries claimed and not yet written: the heartbeat holds them.
        self._in_flight: set[str] = set()
        # Items claimed and not yet scored: what the claim loop keeps under ``capacity``.
        self._held = 0
        self._room = asyncio.Event()
        self._batches: set[asyncio.Task[None]] = set()
        self._ready: list[Ready] = []
        self._writer: asyncio.Task[None] | None = None
        # Item latencies, added to the stats with the next write.
        self.tally = Tally()
        self._scoring = BatchScoring(
            self.verifier, self.queue, self.cache, self.max_deliveries, self.tally
        )

    async def run(self, stop: asyncio.Event) -> None:
        """Run until ``stop`` is set, then stop claiming, finish the items in progress within
        ``grace_s`` and release what is still unscored after it (back to the queue, for
        another worker: never an error), and return."""
        await self._retry_until(stop, lambda: self.queue.ensure_verifier(self.verifier.name))
        logger.info(
            "worker %s scoring %s (batch %d, holding up to %d items)",
            self.consumer,
            self.verifier.name,
            self.batch_size,
            self.capacity,
        )
        # The heartbeat ends on an event, never by cancellation (see ``_heartbeat``).
        beating = asyncio.Event()
        beat = asyncio.create_task(self._heartbeat(beating))
        # A verifier may serve a queue of its own beside its verifier's (the code sessions'
        # per-worker stream: ``ServesCompanion``); it stops with the claims (a
        # Redis claim is not cancelled midway: it sees ``stop`` within its block time).
        side = None
        if isinstance(self.verifier, ServesCompanion):
            side = asyncio.create_task(self.verifier.companion(self.queue, self.heartbeat_s, stop))
        await self._claim_loop(stop)
        if side is not None:
            await asyncio.gather(side, return_exceptions=True)
        if self._batches:
            _, late = await asyncio.wait(set(self._batches), timeout=self.grace_s)
            if late:
                logger.warning(
                    "stopping: %d batches unfinished after %.1f s; releasing their entries",
                    len(late),
                    self.grace_s,
                )
                for task in late:
                    task.cancel()
                await asyncio.gather(*late, return_exceptions=True)
        if self._writer is not None:  # results of released entries may still be on their way
            await asyncio.wait({self._writer}, timeout=self.grace_s)
        if self.recorder is not None:
            await self.recorder.aclose()
        beating.set()
        await beat
        # A worker that stops says so: /readyz need not wait for its heartbeat to age out.
        try:
            await self.queue.retire(self.verifier.name, self.consumer)
        except QueueUnavailable as exc:
            logger.warning("retiring %s failed (%s); it ages out", self.consumer, exc.message)

    async def _retry_until(
        self, stop: asyncio.Event, action: Callable[[], Awaitable[None]]
    ) -> None:
        while not stop.is_set():
            try:
                await action()
                return
            except QueueUnavailable as exc:
                logger.warning("%s; retrying in 1 s", exc.message)
                await asyncio.sleep(1.0)

    async def _heartbeat(self, until: asyncio.Event) -> None:
        # Runs until ``until`` is set, after the claim loop: entries finishing in a
        # shutdown's grace period stay held. An event, not a cancellation, ends it: Python
        # 3.11's asyncio.wait_for loses a cancellation that arrives as its inner call
        # completes (CPython gh-86296), and redis-py waits that way while it sets up a
        # connection; a lost one left this loop beating and the worker deaf to SIGTERM
        # (issue 39).
        while not until.is_set():
            try:
                await self.queue.heartbeat(
                    self.verifier.name,
                    self.consumer,
                    pool_utilisation(self.verifier),
                    backend_load(self.verifier),
                )
                if self._in_flight:
                    await self.queue.extend(
                        self.verifier.name, self.consumer, list(self._in_flight)
                    )
            except Exception as exc:
                logger.warning("heartbeat failed: %s", exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(until.wait(), self.heartbeat_s)

    async def _claim_loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            room = self.capacity - self._held
            if room < self._low_water:
                self._room.clear()
                await _unless_stopped(self._room.wait(), stop)
                continue
            try:
                deliveries = await self._claim(stop, min(self.batch_size, room))
            except QueueUnavailable as exc:
                logger.warning("claim failed: %s; retrying in 1 s", exc.message)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 1.0)
                continue
            if not deliveries:
                continue
            if stop.is_set():  # claimed while stopping: hand them straight back
                await self._release([d.entry_id for d in deliveries])
                return
            self._hold(len(deliveries))
            task = asyncio.create_task(self._process_logged(deliveries))
            self._batches.add(task)
            task.add_done_callback(self._batches.discard)

    async def _process_logged(self, deliveries: Sequence[Delivery]) -> None:
        try:
            await self._score_held(deliveries)
        except Exception:
            # The worker must outlive any one batch: its entries stay pending and are
            # delivered again (and dead-lettered if they keep failing).
            logger.exception(
                "batch of %d entries failed; they will be redelivered", len(deliveries)
            )

    async def _claim(self, stop: asyncio.Event, count: int) -> list[Delivery]:
        claim = self.queue.claim(self.verifier.name, self.consumer, count, self.block_s)
        if not self.queue.claim_cancellable:
            # A Redis read is not cancelled midway (entries it took would wait out the
            # visibility timeout); it returns within block_s.
            return await claim
        # The embedded queue takes nothing until it returns, so its wait can end with stop.
        return await _unless_stopped(claim, stop) or []

    async def _release(self, entry_ids: list[str]) -> None:
        try:
            await self.queue.release(self.verifier.name, self.consumer, entry_ids)
        except QueueUnavailable as exc:
            logger.warning(
                "releasing %d entries failed (%s); they are claimed after the visibility timeout",
                len(entry_ids),
                exc.message,
            )

    async def process(self, deliveries: Sequence[Delivery]) -> None:
        """Score one claimed batch and write its results (the unit a test can drive).

        Returns when every result of the batch is written (or writing it was given up,
        leaving its entry pending for another worker). Cancelled (a shutdown past its grace
        period), it releases the entries whose results are not written.
        """
        self._hold(len(deliveries))
        await self._score_held(deliveries)

    async def _score_held(self, deliveries: Sequence[Delivery]) -> None:
        """``process``, for a batch whose room is already held."""
        batch = _Batch(deliveries, self._scoring, self)
        self._in_flight.update(batch.unwritten)
        try:
            await batch.run()
        except asyncio.CancelledError:
            await self._release(sorted(batch.unwritten))
            raise
        finally:
            self._in_flight.difference_update(d.entry_id for d in deliveries)
            self._hold(-batch.unscored)

    def _hold(self, items: int) -> None:
        self._held += items
        if self.capacity - self._held >= self._low_water:
            self._room.set()

    def accept(self, ready: Ready) -> None:
        """Queue results for writing (and good outcomes for the cache) and give their room
        back (``ResultSink``); the writer tells their batch once they are written. What is
        accepted while a write is in flight is written together by the next one."""
        self._hold(-len(ready.done))
        self._ready.append(ready)
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._drain())

    async def _drain(self) -> None:
        # No linger before a write: a tool call waits on its one result (a code run is
        # ~30 ms), and under load results pile up while the previous write is in flight.
        while self._ready:
            parts, self._ready = self._ready, []
            done = [written for part in parts for written in part.done]
            counters: dict[str, int] = {}
            fresh: dict[str, str] = {}
            tallied = [part.counters for part in parts]
            tallied += [self.tally.take(), verifier_stats(self.verifier)]
            for part_counters in tallied:
                for label, n in part_counters.items():
                    counters[label] = counters.get(label, 0) + n
            for part in parts:
                fresh.update(part.fresh)
            try:
                # Cached first: a job seen done finds its results in the cache on a resend.
                if fresh:
                    await self._cache_set(fresh)
                await self._write(done, counters)
                if self.recorder is not None:  # after the write: the trainer waits on it
                    self.recorder.record(done)
            finally:
                for part in parts:
                    part.batch.written(part.done)

    async def _write(self, done: list[Written], counters: dict[str, int]) -> None:
        # The results were computed at some cost: hold on through a short Redis outage.
        # If it lasts, the entries stay pending and another worker redoes them later.
        for attempt in range(1, self.write_attempts + 1):
            try:
                await self.queue.complete(self.verifier.name, done, counters)
                return
            except QueueUnavailable as exc:
                logger.warning("writing results failed (%s), attempt %d", exc.message, attempt)
                if attempt < self.write_attempts:
                    await asyncio.sleep(1.0)
        else:
            logger.error(
                "gave up writing %d results of %s after %d attempts; their entries stay "
                "pending and are scored again by the worker that claims them next",
                len(done),
                self.verifier.name,
                self.write_attempts,
            )

    async def _cache_set(self, fresh: dict[str, str]) -> None:
        try:
            await self.cache.set_many(fresh)
        except Exception:  # a cache outage costs speed, never results
            logger.warning(
                "result cache unavailable; %d outcomes not cached", len(fresh), exc_info=True
            )


@dataclass
class Ready:
    """Results of one batch waiting for the writer, with their counters and cache entries.

    Attributes:
        batch: The batch they belong to (told once they are written).
        done: Each entry with its result (``ItemResult`` JSON).
        counters: Counters to add to the stats with the write.
        fresh: Outcomes (JSON) to cache, by cache key.
    """

    batch: _Batch
    done: list[Written]
    counters: dict[str, int]
    fresh: dict[str, str]


class _Batch:
    """One claimed batch on its way through a worker: answered, scored, written.

    It sees the worker only through ``scoring`` (verifier, cache, dead letters, rendering)
    and ``sink`` (where its results go).

    Attributes:
        unwritten: Entry ids whose results have not been through the writer yet (released
            if the batch is cancelled).
        unscored: Items not scored yet (the room they hold in the worker).
    """

    def __init__(
        self, deliveries: Sequence[Delivery], scoring: BatchScoring, sink: ResultSink
    ) -> None:
        self.deliveries = deliveries
        self.scoring = scoring
        self.sink = sink
        self.unwritten = {d.entry_id for d in deliveries}
        self.unscored = len(deliveries)
        self._all_written: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._turn: Ready | None = None

    def written(self, done: list[Written]) -> None:
        """The writer is through with ``done`` (written, or given up after its attempts)."""
        self.unwritten.difference_update(delivery.entry_id for delivery, _ in done)
        if not self.unwritten and not self._all_written.done():
            self._all_written.set_result(None)

    async def run(self) -> None:
        """Answer, score and write every entry; return when all results are written."""
        counters: dict[str, int] = {}
        done: list[Written] = []
        live: list[tuple[Delivery, ScoreItem]] = []
        for delivery in self.deliveries:
            admitted = await self._admit(delivery)
            if isinstance(admitted, ItemOutcome):
                done.append((delivery, self.scoring.render(delivery, admitted, counters)))
            else:
                live.append((delivery, admitted))
        done += await self._answer_from_cache(live, counters)
        self._emit(Ready(self, done, counters, {}))
        await self._score(live)
        if self.unwritten:
            await self._all_written

    async def _admit(self, delivery: Delivery) -> ScoreItem | ItemOutcome:
        """The entry's item to score, or the outcome of an entry that is not scored
        (dead-lettered, or no longer a valid item)."""
        scoring = self.scoring
        if delivery.deliveries > scoring.max_deliveries:
            reason = f"delivered {delivery.deliveries} times without a result"
            await scoring.dead_letter(delivery, reason)
            return ItemOutcome.failed(
                DeadLettered(f"{reason}: it may crash workers; moved to the dead-letter stream")
            )
        try:
            validate = scoring.verifier.item_model.model_validate
            return await off_loop_if_large(delivery.size, validate, delivery.payload)
        except ValidationError as exc:
            return ItemOutcome.failed(BadInput(f"item no longer validates: {exc}"))

    async def _answer_from_cache(
        self, live: list[tuple[Delivery, ScoreItem]], counters: dict[str, int]
    ) -> list[Written]:
        """Results of the live items found in the cache (removed from ``live``)."""
        keys = [d.cache_key for d, _ in live if d.cache_key]
        if not keys:
            return []
        hits = dict(zip(keys, await self.scoring.cached(keys), strict=True))
        done: list[Written] = []
        missed: list[tuple[Delivery, ScoreItem]] = []
        for delivery, item in live:
            cached = hits.get(delivery.cache_key) if delivery.cache_key else None
            if cached is None:
                missed.append((delivery, item))
                continue
            outcome = ItemOutcome.model_validate_json(cached)
            counters["cache_hits"] = counters.get("cache_hits", 0) + 1
            done.append((delivery, self.scoring.render(delivery, outcome, counters, cached=True)))
        live[:] = missed
        # Each cached item is looked up at submission (a hit is counted there) and, if it
        # missed, here once more: a hit or a miss here counts it once. Misses go to the
        # worker's tally, not to ``counters``, which a batch without hits never writes.
        self.scoring.tally.add(
            "cache_misses", sum(1 for delivery, _ in missed if delivery.cache_key)
        )
        return done

    async def _score(self, live: list[tuple[Delivery, ScoreItem]]) -> None:
        """Score each distinct input once; emit each result as it is ready."""
        unique: dict[str, list[Delivery]] = {}
        items: dict[str, ScoreItem] = {}
        for delivery, item in live:
            key = delivery.cache_key or f"uncached:{delivery.entry_id}"
            unique.setdefault(key, []).append(delivery)
            items.setdefault(key, item)
        if not unique:
            return
        verifier = self.scoring.verifier
        if not isinstance(verifier, ScoresEachItem):
            keys = list(unique)
            outcomes = await call_verifier(verifier, [items[k] for k in keys])
            self._finish(list(zip([unique[k] for k in keys], outcomes, strict=True)))
            return

        async def one(key: str) -> None:
            outcome = await score_guarded(items[key], verifier.item_model, verifier.score_item)
            self._finish([(unique[key], _finite(outcome, verifier.name))])

        await asyncio.gather(*(one(key) for key in unique))

    def _finish(self, scored: list[tuple[list[Delivery], ItemOutcome]]) -> None:
        """Add the results of scored inputs (each to all its entries), and the good ones for
        the cache, to what the batch emits at the end of this event-loop turn: the items of
        one pool task finish in the same turn, and go to the writer as one."""
        if self._turn is None:
            self._turn = Ready(self, [], {}, {})
            asyncio.get_running_loop().call_soon(self._emit_turn)
        ready = self._turn
        for deliveries, outcome in scored:
            for delivery in deliveries:
                ready.done.append(
                    (delivery, self.scoring.render(delivery, outcome, ready.counters))
                )
                if delivery.cache_key and outcome.error is None and outcome.reward is not None:
                    ready.fresh[delivery.cache_key] = outcome.model_dump_json()

    def _emit_turn(self) -> None:
        if self._turn is not None:
            ready, self._turn = self._turn, None
            self._emit(ready)

    def _emit(self, ready: Ready) -> None:
        """Hand results to the sink (which writes them and gives their room back)."""
        if not ready.done:
            return
        self.unscored -= len(ready.done)
        self.sink.accept(ready)


async def _unless_stopped(awaitable: Awaitable[T], stop: asyncio.Event) -> T | None:
    """Await ``awaitable`` until ``stop`` is set; None (and ``awaitable`` cancelled) if
    ``stop`` came first."""
    waiting = asyncio.ensure_future(awaitable)
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait({waiting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if not waiting.done():
        waiting.cancel()
        return None
    return waiting.result()
