"""The worker runtime on a real queue: dedupe, cache, dead letters, crashes."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Sequence

import pytest
import redis.asyncio as aioredis

from tests.conftest import RedisServer
from tests.core.toy import ToyItem, ToyVerifier
from tribunal.core.cache import MemoryCache, RedisCache, cache_entry
from tribunal.core.queue.base import JobQueue, QueuedItem
from tribunal.core.queue.keys import Keys
from tribunal.core.queue.memory import MemoryQueue
from tribunal.core.queue.redis_streams import RedisStreamsQueue
from tribunal.core.verifier import score_each
from tribunal.core.worker import WorkerRuntime
from tribunal.wire.envelope import (
    ItemError,
    ItemOutcome,
    ItemResult,
    ScoreItem,
    VerifierInfo,
    result_json,
)


@pytest.fixture(params=["memory", "redis"])
async def queue_and_cache(
    request: pytest.FixtureRequest, key_prefix: str
) -> AsyncIterator[tuple[JobQueue, object]]:
    limits = {"max_queue_items": 1000, "result_ttl_s": 60, "visibility_timeout_s": 0.3}
    if request.param == "memory":
        queue: JobQueue = MemoryQueue(**limits)
        cache: object = MemoryCache(100, 60)
    else:
        server = request.getfixturevalue("redis_server")
        rq = RedisStreamsQueue(server.url, Keys(key_prefix), **limits)
        queue, cache = rq, RedisCache(rq.redis, rq.keys, "toy", 60, max_items=1000)
    await queue.ensure_verifier("toy")
    yield queue, cache
    await queue.aclose()


def queued(texts: list[str]) -> list[QueuedItem]:
    return [
        QueuedItem(i, {"id": f"i{i}", "text": t}, cache_entry("1", "0" * 16, {"text": t}))
        for i, t in enumerate(texts)
    ]


async def drain(runtime: WorkerRuntime, queue: JobQueue) -> None:
    while deliveries := await queue.claim("toy", runtime.consumer, 64, block_s=0.05):
        await runtime.process(deliveries)


async def test_identical_items_of_a_group_are_scored_once_then_cached(queue_and_cache) -> None:
    queue, cache = queue_and_cache
    verifier = ToyVerifier()
    runtime = WorkerRuntime(verifier, queue, cache)
    group = ["same answer"] * 4 + ["other"]
    job = await queue.submit("toy", queued(group), total=5, prefilled={})
    await drain(runtime, queue)
    assert verifier.calls == [["same answer", "other"]]
    results = [json.loads(r) for _, r in sorted((await queue.job(job.job_id)).results.items())]
    assert [r["id"] for r in results] == ["i0", "i1", "i2", "i3", "i4"]
    assert results[0]["reward"] == pytest.approx(4 / 11) and not results[0]["cached"]
    assert results[0]["verifier"] == {"name": "toy", "version": "1", "config_hash": "0" * 16}

    job = await queue.submit("toy", queued(["same answer"]), total=1, prefilled={})
    await drain(runtime, queue)
    assert len(verifier.calls) == 1, "a repeat must be served from the cache"
    [result] = (await queue.job(job.job_id)).results.values()
    assert json.loads(result)["cached"] is True
    assert (await queue.stats("toy"))["cache_hits"] == 1


async def test_item_errors_are_results_and_never_cached(queue_and_cache) -> None:
    queue, cache = queue_and_cache
    verifier = ToyVerifier()
    runtime = WorkerRuntime(verifier, queue, cache)
    for _ in range(2):
        job = await queue.submit("toy", queued(["bad", "fine"]), total=2, prefilled={})
        await drain(runtime, queue)
        bad, fine = (
            json.loads(r) for _, r in sorted((await queue.job(job.job_id)).results.items())
        )
        assert bad["reward"] is None and bad["error"]["code"] == "bad_input"
        assert bad["error"]["field"] == "text" and fine["reward"] == 0.5
    assert [c for c in verifier.calls if "bad" in c] == [["bad", "fine"], ["bad"]]


async def test_a_cache_that_does_not_answer_costs_speed_never_results(
    caplog: pytest.LogCaptureFixture, key_prefix: str
) -> None:
    """A real Redis client at a port nothing listens on: reads and writes of the cache both
    fail; every item is scored and written all the same, and each failure leaves a log line."""
    queue = MemoryQueue(max_queue_items=100, result_ttl_s=60, visibility_timeout_s=5)
    await queue.ensure_verifier("toy")
    down = aioredis.Redis.from_url("redis://127.0.0.1:1/0")
    cache = RedisCache(down, Keys(key_prefix), "toy", 60, max_items=100)
    verifier = ToyVerifier()
    runtime = WorkerRuntime(verifier, queue, cache)
    job = await queue.submit("toy", queued(["a", "b", "a"]), total=3, prefilled={})
    with caplog.at_level(logging.WARNING, logger="tribunal.core.worker"):
        await drain(runtime, queue)
    results = [json.loads(r) for r in (await queue.job(job.job_id)).results.values()]
    assert len(results) == 3 and all(r["error"] is None and not r["cached"] for r in results)
    assert verifier.calls == [["a", "b"]]
    messages = [r.getMessage() for r in caplog.records]
    assert any("scoring without it" in m for m in messages)
    assert any("2 outcomes not cached" in m for m in messages)
    await down.aclose()


async def test_an_entry_that_keeps_failing_goes_to_dead_letters(queue_and_cache) -> None:
    queue, cache = queue_and_cache
    runtime = WorkerRuntime(ToyVerifier(), queue, cache, max_deliveries=2)
    job = await queue.submit("toy", queued(["poison"]), total=1, prefilled={})
    for _ in range(2):  # two workers take it and die without a result
        assert await queue.claim("toy", "doomed", 1, block_s=0.5)
        await asyncio.sleep(0.35)
    await drain(runtime, queue)
    [result] = [json.loads(r) for r in (await queue.job(job.job_id)).results.values()]
    assert result["reward"] is None
    assert result["error"]["code"] == "dead_letter" and result["error"]["retryable"] is False
    assert await queue.depth("toy") == 0


async def test_a_crashing_verifier_fails_its_batch_as_internal_errors(queue_and_cache) -> None:
    queue, cache = queue_and_cache

    class Crashing(ToyVerifier):
        async def score(self, items):
            raise RuntimeError("bug")

    runtime = WorkerRuntime(Crashing(), queue, cache)
    job = await queue.submit("toy", queued(["a", "b"]), total=2, prefilled={})
    await drain(runtime, queue)
    results = [json.loads(r) for r in (await queue.job(job.job_id)).results.values()]
    assert [r["error"]["code"] for r in results] == ["internal_error"] * 2
    assert all(r["reward"] is None for r in results)


async def test_run_scores_until_stopped(queue_and_cache) -> None:
    queue, cache = queue_and_cache
    runtime = WorkerRuntime(ToyVerifier(), queue, cache, heartbeat_s=0.1, block_s=0.1)
    stop = asyncio.Event()
    task = asyncio.create_task(runtime.run(stop))
    job = await queue.submit("toy", queued([f"t{i}" for i in range(200)]), total=200, prefilled={})
    record = await queue.wait(job.job_id, 10)
    assert record.is_done and len(record.results) == 200
    assert await queue.live_workers("toy", within_s=5) == 1
    stop.set()
    await asyncio.wait_for(task, 5)


class Reporting(ToyVerifier):
    """Has the optional capabilities a worker reports: a pool, a backend, counters, and a
    companion that records that it ran and saw the stop."""

    def __init__(self) -> None:
        super().__init__()
        self.companion_ran = False

    def utilisation(self) -> tuple[int, int]:
        return 1, 4

    def backend_load(self) -> tuple[int, int]:
        return 2, 8

    def take_stats(self) -> dict[str, int]:
        return {"toy_backend_calls": 1}

    async def companion(self, queue: JobQueue, heartbeat_s: float, stop: asyncio.Event) -> None:
        await stop.wait()
        self.companion_ran = True


async def test_a_verifiers_capabilities_reach_the_queue(queue_and_cache) -> None:
    """Each capability protocol the verifier satisfies is used: pool and backend load with
    the heartbeat, counters with the write, the companion beside the claims until stop."""
    queue, cache = queue_and_cache
    verifier = Reporting()
    runtime = WorkerRuntime(verifier, queue, cache, heartbeat_s=0.05, block_s=0.05)
    stop = asyncio.Event()
    task = asyncio.create_task(runtime.run(stop))
    job = await queue.submit("toy", queued(["a"]), total=1, prefilled={})
    assert (await queue.wait(job.job_id, 10)).is_done
    assert await queue.utilisation("toy", within_s=5) == (1, 4)
    assert await queue.backend_load("toy", within_s=5) == (2, 8)
    assert (await queue.stats("toy"))["toy_backend_calls"] >= 1
    assert not verifier.companion_ran
    stop.set()
    await asyncio.wait_for(task, 5)
    assert verifier.companion_ran


class ItemWiseToy(ToyVerifier):
    """Scores item by item (``score_item``); an item whose text starts with ``slow`` waits on
    ``release``. Counts the items being scored at once."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.scoring = 0
        self.most_at_once = 0

    async def score_item(self, item: ToyItem) -> ItemOutcome:
        self.scoring += 1
        self.most_at_once = max(self.most_at_once, self.scoring)
        try:
            if item.text.startswith("slow"):
                await self.release.wait()
            [outcome] = await ToyVerifier.score(self, [item])
            return outcome
        finally:
            self.scoring -= 1

    async def score(self, items: Sequence[ScoreItem]) -> list[ItemOutcome]:
        return await score_each(items, ToyItem, self.score_item)


async def test_a_slow_item_holds_back_neither_its_batch_mates_nor_later_jobs(
    queue_and_cache,
) -> None:
    queue, cache = queue_and_cache
    verifier = ItemWiseToy()
    # Room for one batch of 4: a worker that waited for whole batches would score nothing
    # else while the slow item runs.
    runtime = WorkerRuntime(
        verifier, queue, cache, batch_size=4, concurrency=1, heartbeat_s=0.1, block_s=0.05
    )
    stop = asyncio.Event()
    task = asyncio.create_task(runtime.run(stop))
    try:
        first = await queue.submit("toy", queued(["slow", "a", "e"]), total=3, prefilled={})
        later = await queue.submit(
            "toy", queued([f"t{i}" for i in range(40)]), total=40, prefilled={}
        )
        record = await queue.wait(later.job_id, 10)
        assert record.is_done and len(record.results) == 40
        mates = (await queue.job(first.job_id)).results
        assert sorted(mates) == [1, 2], "the slow item's batch-mates are written without it"
        assert verifier.scoring == 1 and verifier.most_at_once <= 4
        verifier.release.set()
        record = await queue.wait(first.job_id, 10)
        assert record.is_done and json.loads(record.results[0])["id"] == "i0"
    finally:
        verifier.release.set()
        stop.set()
        await asyncio.wait_for(task, 5)


async def test_a_stop_releases_the_items_still_being_scored(queue_and_cache) -> None:
    queue, cache = queue_and_cache
    verifier = ItemWiseToy()
    runtime = WorkerRuntime(verifier, queue, cache, block_s=0.05, grace_s=0.2)
    stop = asyncio.Event()
    task = asyncio.create_task(runtime.run(stop))
    job = await queue.submit("toy", queued(["a", "slow one"]), total=2, prefilled={})
    while len((await queue.job(job.job_id)).results) < 1:
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(task, 5)
    # The slow item is back in the queue, unscored, for the next worker.
    [delivery] = await queue.claim("toy", "next", 10, block_s=0.5)
    assert delivery.payload["text"] == "slow one"
    assert len((await queue.job(job.job_id)).results) == 1


class Reconnecting(RedisStreamsQueue):
    """Sets up a connection for every heartbeat, as after Redis dropped its idle ones (a
    restart, a client timeout): redis-py's set-up waits in ``asyncio.wait_for``."""

    async def heartbeat(
        self,
        verifier: str,
        consumer: str,
        utilisation: tuple[int, int] | None = None,
        backend: tuple[int, int] | None = None,
    ) -> None:
        await self.redis.connection_pool.disconnect(inuse_connections=False)
        await super().heartbeat(verifier, consumer, utilisation, backend)


async def test_a_stop_ends_the_heartbeat_while_it_reconnects(
    redis_server: RedisServer, key_prefix: str
) -> None:
    """Every stop returns, though each heartbeat is setting up its connection (issue 39).

    On Python 3.11, ``asyncio.wait_for`` loses a cancellation that arrives as its inner call
    ends (CPython gh-86296). A heartbeat ended by cancellation then beat on, and the worker
    never stopped: a worker of the e2e test ignored SIGTERM in 3 of 14 runs. Before the fix
    this test failed (a stop that never returned) in 9 of 9 runs, and passed 8 of 8 after.
    """
    limits = {"max_queue_items": 1000, "result_ttl_s": 60, "visibility_timeout_s": 30}
    queue = Reconnecting(redis_server.url, Keys(key_prefix), **limits)
    await queue.ensure_verifier("toy")
    try:
        for _ in range(40):
            # A heartbeat always in flight: the stop lands in one.
            runtime = WorkerRuntime(
                ToyVerifier(), queue, MemoryCache(10, 60), heartbeat_s=0.0, block_s=0.02
            )
            stop = asyncio.Event()
            task = asyncio.create_task(runtime.run(stop))
            while not await queue.live_workers("toy", within_s=60):  # it has beaten once
                await asyncio.sleep(0.01)
            stop.set()
            stopped, _ = await asyncio.wait({task}, timeout=10)
            while not task.done():  # a heartbeat that beats on: ended for the next test
                task.cancel()
                await asyncio.wait({task}, timeout=0.1)
            assert stopped, "the worker did not stop: its heartbeat lost its cancellation"
    finally:
        await queue.aclose()


@pytest.mark.parametrize(
    "outcome",
    [
        ItemOutcome(reward=0.5, details={"method": "boxed", "scores": [1, 0.25], "é": "ü"}),
        ItemOutcome(
            reward=None,
            error=ItemError(code="bad_input", message="x: missing", retryable=False, field="x"),
        ),
        ItemOutcome(reward=1.0, verifier=VerifierInfo(name="spec:s", version="2", config_hash="f")),
        ItemOutcome(reward=1.0, details={"tags": {"a"}}),  # orjson cannot: pydantic writes it
    ],
)
def test_result_json_is_the_item_result_pydantic_would_write(outcome: ItemOutcome) -> None:
    info = VerifierInfo(name="toy", version="1", config_hash="0" * 16)
    expected = ItemResult(
        id="q",
        reward=outcome.reward,
        error=outcome.error,
        details=outcome.details,
        verifier=outcome.verifier or info,
        cached=True,
    ).model_dump_json()
    assert json.loads(result_json("q", outcome, info, cached=True)) == json.loads(expected)
