"""The worker runtime: claim, dedupe, score, write, acknowledge, heartbeat.

Each worker process runs ``concurrency`` batch loops on one event loop. A loop claims up to
``batch_size`` entries, answers dead letters and cache hits at once, scores each distinct
input once (the identical completions of a GRPO group are one call), writes every result to
its job and acknowledges the entries. While a batch is being scored its entries are kept
from other workers by a heartbeat; if the process dies, they are claimed by another worker
after the visibility timeout, and after ``max_deliveries`` they become ``dead_letter``
errors. Results are first-wins per item, so a batch scored twice still yields one result
per item.
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

import orjson
from pydantic import ValidationError

from tribunal.core.cache import ResultCache
from tribunal.core.envelope import ItemOutcome, ItemResult, ScoreItem, VerifierInfo
from tribunal.core.errors import (
    BadInput,
    DeadLettered,
    InternalError,
    QueueUnavailable,
    TribunalError,
)
from tribunal.core.queue.base import Delivery, JobQueue
from tribunal.core.verifier import Verifier

logger = logging.getLogger(__name__)


def consumer_name() -> str:
    """Return a consumer name unique to this process: ``host:pid:random``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def verifier_info(verifier: Verifier) -> VerifierInfo:
    """Return the name, version and config hash stamped on every result of ``verifier``."""
    return VerifierInfo(
        name=verifier.name, version=verifier.version, config_hash=verifier.config_hash()
    )


def result_json(
    item_id: str, outcome: ItemOutcome, info: VerifierInfo, *, cached: bool = False
) -> str:
    """Serialise one ``ItemResult``.

    The outcome is a validated model already, so it is written straight from its fields
    with orjson: building and dumping an ``ItemResult`` cost four times as much, once per
    item in every worker and in the gateway. Details that orjson cannot write (a set, a
    model, a non-string key ...) go through pydantic as before; the JSON is the same.
    """
    error, verifier = outcome.error, outcome.verifier or info
    try:
        data: bytes = orjson.dumps(
            {
                "id": item_id,
                "reward": outcome.reward,
                "error": None if error is None else error.__dict__,
                "details": outcome.details,
                "verifier": verifier.__dict__,
                "cached": cached or outcome.cached,
            }
        )
    except orjson.JSONEncodeError:
        result = ItemResult(
            id=item_id,
            reward=outcome.reward,
            error=error,
            details=outcome.details,
            verifier=verifier,
            cached=cached or outcome.cached,
        )
        return result.model_dump_json()
    return data.decode()


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
    """``(busy, capacity)`` of the verifier's pool, if it has one (``Verifier.utilisation``,
    optional: a verifier that waits on a remote model has no pool of its own)."""
    utilisation = getattr(verifier, "utilisation", None)
    return None if utilisation is None else utilisation()


@dataclass
class WorkerRuntime:
    """Scores the queued items of one verifier.

    Args:
        verifier: The verifier (already started).
        queue: The job queue.
        cache: The result cache.
        batch_size: Entries claimed per read.
        concurrency: Batches scored at once by this process.
        max_deliveries: Deliveries after which an entry is dead-lettered.
        heartbeat_s: Period of the liveness heartbeat and of the hold on claimed entries (s).
        block_s: How long one claim waits for entries (s).
        grace_s: At stop, how long batches in progress may take before they are released (s).
        write_attempts: Tries (1 s apart) to write a batch's results through a queue outage.
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

    def __post_init__(self) -> None:
        self.info = verifier_info(self.verifier)
        self._in_flight: set[str] = set()

    async def run(self, stop: asyncio.Event) -> None:
        """Run until ``stop`` is set, then stop claiming, finish the batches in progress
        within ``grace_s`` and release what is still unscored after it (back to the queue,
        for another worker: never an error), and return."""
        await self._retry_until(stop, lambda: self.queue.ensure_verifier(self.verifier.name))
        logger.info(
            "worker %s scoring %s (batch %d, concurrency %d)",
            self.consumer,
            self.verifier.name,
            self.batch_size,
            self.concurrency,
        )
        loops = [asyncio.create_task(self._loop(stop)) for _ in range(self.concurrency)]
        beat = asyncio.create_task(self._heartbeat())
        await stop.wait()
        _, late = await asyncio.wait(loops, timeout=self.grace_s)
        if late:
            logger.warning(
                "stopping: %d batches unfinished after %.1f s; releasing their entries",
                len(late),
                self.grace_s,
            )
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        beat.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beat
        # A worker that stops says so: /readyz need not wait for its heartbeat to age out.
        with contextlib.suppress(QueueUnavailable):
            await self.queue.retire(self.verifier.name, self.consumer)

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

    async def _heartbeat(self) -> None:
        # Runs until cancelled, after the batch loops: entries finishing in a shutdown's grace
        # period stay held.
        while True:
            try:
                await self.queue.heartbeat(
                    self.verifier.name, self.consumer, pool_utilisation(self.verifier)
                )
                if self._in_flight:
                    await self.queue.extend(
                        self.verifier.name, self.consumer, list(self._in_flight)
                    )
            except Exception as exc:
                logger.warning("heartbeat failed: %s", exc)
            await asyncio.sleep(self.heartbeat_s)

    async def _loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                deliveries = await self._claim(stop)
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
            try:
                await self.process(deliveries)
            except Exception:
                # The loop must outlive any one batch: its entries stay pending and are
                # delivered again (and dead-lettered if they keep failing).
                logger.exception(
                    "batch of %d entries failed; they will be redelivered", len(deliveries)
                )

    async def _claim(self, stop: asyncio.Event) -> list[Delivery]:
        claim = self.queue.claim(self.verifier.name, self.consumer, self.batch_size, self.block_s)
        if self.queue.kind != "memory":
            # A Redis read is not cancelled midway (entries it took would wait out the
            # visibility timeout); it returns within block_s.
            return await claim
        # The embedded queue takes nothing until it returns, so its wait can end with stop.
        claiming = asyncio.ensure_future(claim)
        stopping = asyncio.ensure_future(stop.wait())
        await asyncio.wait({claiming, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if not claiming.done():
            claiming.cancel()
            return []
        return claiming.result()

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

        Cancelled (a shutdown past its grace period), it releases the batch's entries.
        """
        ids = [d.entry_id for d in deliveries]
        self._in_flight.update(ids)
        try:
            done, counters = await self._score(deliveries)
            await self._write(done, counters)
        except asyncio.CancelledError:
            await self._release(ids)
            raise
        finally:
            self._in_flight.difference_update(ids)

    async def _write(self, done: list[tuple[Delivery, str]], counters: dict[str, int]) -> None:
        # The results were computed at some cost: hold on through a short Redis outage.
        # If it lasts, the entries stay pending and another worker redoes them later.
        for attempt in range(1, self.write_attempts + 1):
            try:
                await self.queue.complete(self.verifier.name, done)
                break
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
            return
        with contextlib.suppress(QueueUnavailable):
            await self.queue.incr_stats(self.verifier.name, counters)

    async def _score(
        self, deliveries: Sequence[Delivery]
    ) -> tuple[list[tuple[Delivery, str]], dict[str, int]]:
        counters: dict[str, int] = {}
        done: list[tuple[Delivery, str]] = []
        live: list[tuple[Delivery, ScoreItem]] = []
        for delivery in deliveries:
            if delivery.deliveries > self.max_deliveries:
                reason = f"delivered {delivery.deliveries} times without a result"
                with contextlib.suppress(QueueUnavailable):
                    await self.queue.dead_letter(self.verifier.name, delivery, reason)
                outcome = ItemOutcome.failed(
                    DeadLettered(f"{reason}: it may crash workers; moved to the dead-letter stream")
                )
                done.append((delivery, self._result(delivery, outcome, counters)))
                continue
            try:
                live.append((delivery, self.verifier.item_model.model_validate(delivery.payload)))
            except ValidationError as exc:
                outcome = ItemOutcome.failed(BadInput(f"item no longer validates: {exc}"))
                done.append((delivery, self._result(delivery, outcome, counters)))
        done += await self._score_live(live, counters)
        return done, counters

    async def _score_live(
        self, live: list[tuple[Delivery, ScoreItem]], counters: dict[str, int]
    ) -> list[tuple[Delivery, str]]:
        done: list[tuple[Delivery, str]] = []
        keys = [d.cache_key for d, _ in live if d.cache_key]
        hits = dict(zip(keys, await self._cache_get(keys), strict=True))
        unique: dict[str, int] = {}
        to_score: list[ScoreItem] = []
        slots: list[tuple[Delivery, int]] = []
        for delivery, item in live:
            cached = hits.get(delivery.cache_key) if delivery.cache_key else None
            if cached is not None:
                outcome = ItemOutcome.model_validate_json(cached)
                counters["cache_hits"] = counters.get("cache_hits", 0) + 1
                done.append((delivery, self._result(delivery, outcome, counters, cached=True)))
                continue
            key = delivery.cache_key or f"uncached:{delivery.entry_id}"
            if key not in unique:
                unique[key] = len(to_score)
                to_score.append(item)
            slots.append((delivery, unique[key]))
        if not to_score:
            return done
        outcomes = await self._call_verifier(to_score)
        fresh: dict[str, str] = {}
        for delivery, slot in slots:
            outcome = outcomes[slot]
            done.append((delivery, self._result(delivery, outcome, counters)))
            if delivery.cache_key and outcome.error is None and outcome.reward is not None:
                fresh[delivery.cache_key] = outcome.model_dump_json()
        with contextlib.suppress(Exception):
            await self.cache.set_many(fresh)
        return done

    async def _cache_get(self, keys: list[str]) -> list[str | None]:
        try:
            return await self.cache.get_many(keys)
        except Exception:  # a cache outage costs speed, never results
            logger.warning("result cache unavailable; scoring without it", exc_info=True)
            return [None] * len(keys)

    async def _call_verifier(self, items: list[ScoreItem]) -> list[ItemOutcome]:
        started = time.perf_counter()
        try:
            outcomes = await self.verifier.score(items)
        except TribunalError as exc:
            logger.exception("verifier %s failed a whole batch", self.verifier.name)
            return [ItemOutcome.failed(exc)] * len(items)
        except Exception:
            logger.exception("verifier %s crashed on a batch", self.verifier.name)
            error = InternalError(f"the {self.verifier.name} verifier crashed; see its logs")
            return [ItemOutcome.failed(error)] * len(items)
        if len(outcomes) != len(items):
            error = InternalError(
                f"the {self.verifier.name} verifier returned {len(outcomes)} outcomes "
                f"for {len(items)} items"
            )
            return [ItemOutcome.failed(error)] * len(items)
        outcomes = [_finite(outcome, self.verifier.name) for outcome in outcomes]
        logger.debug(
            "scored %d items in %.1f ms", len(items), (time.perf_counter() - started) * 1000
        )
        return outcomes

    def _result(
        self,
        delivery: Delivery,
        outcome: ItemOutcome,
        counters: dict[str, int],
        *,
        cached: bool = False,
    ) -> str:
        label = f"error:{outcome.error.code}" if outcome.error else "scored"
        counters[label] = counters.get(label, 0) + 1
        item_id = str(delivery.payload.get("id", delivery.index))
        return result_json(item_id, outcome, self.info, cached=cached)
