"""The ``JobQueue`` contract, run on both implementations: Redis Streams and embedded."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tribunal.core.metrics import entry_age_s
from tribunal.core.queue.base import JobQueue, QueuedItem
from tribunal.core.queue.keys import Keys, lua_functions
from tribunal.core.queue.memory import MemoryQueue
from tribunal.core.queue.redis_streams import RedisStreamsQueue
from tribunal.wire.errors import IdempotencyConflict, JobNotFound, QueueFull

VISIBILITY_S = 0.5


@pytest.fixture(params=["memory", "redis"])
async def queue(request: pytest.FixtureRequest, key_prefix: str) -> AsyncIterator[JobQueue]:
    limits = {
        "max_queue_items": 10,
        "result_ttl_s": 60,
        "visibility_timeout_s": VISIBILITY_S,
        "max_dead_letters": 3,
    }
    q: JobQueue
    if request.param == "memory":
        q = MemoryQueue(**limits)
    else:
        server = request.getfixturevalue("redis_server")
        q = RedisStreamsQueue(server.url, Keys(key_prefix), **limits)
    await q.ensure_verifier("v")
    yield q
    await q.aclose()


def items(n: int, start: int = 0) -> list[QueuedItem]:
    return [QueuedItem(i, {"id": f"i{i}", "x": i}, None) for i in range(start, start + n)]


async def test_submitted_items_are_claimed_once_with_their_payload(queue: JobQueue) -> None:
    submitted = await queue.submit("v", items(3), total=3, prefilled={})
    assert submitted.created
    first = await queue.claim("v", "c1", 2, block_s=0.1)
    second = await queue.claim("v", "c2", 5, block_s=0.1)
    assert [d.payload["x"] for d in first] == [0, 1]
    assert [d.payload["x"] for d in second] == [2]
    assert {d.job_id for d in first + second} == {submitted.job_id}
    assert all(d.deliveries == 1 for d in first + second)
    assert await queue.claim("v", "c3", 5, block_s=0.1) == []


async def test_job_is_done_when_every_item_has_a_result(queue: JobQueue) -> None:
    submitted = await queue.submit("v", items(2), total=3, prefilled={2: "pre"})
    deliveries = await queue.claim("v", "c", 10, block_s=0.1)
    await queue.complete("v", [(deliveries[0], "r0")])
    record = await queue.job(submitted.job_id)
    assert not record.is_done and record.results == {0: "r0", 2: "pre"}
    await queue.complete("v", [(deliveries[1], "r1")], {"scored": 1, "error:timeout": 2})
    record = await queue.job(submitted.job_id)
    assert record.is_done and record.results == {0: "r0", 1: "r1", 2: "pre"}
    assert await queue.depth("v") == 0
    assert await queue.stats("v") == {"scored": 1, "error:timeout": 2}


async def test_first_result_wins_when_an_item_is_completed_twice(queue: JobQueue) -> None:
    submitted = await queue.submit("v", items(1), total=1, prefilled={})
    [delivery] = await queue.claim("v", "c", 1, block_s=0.1)
    await queue.complete("v", [(delivery, "first")])
    await queue.complete("v", [(delivery, "second")])
    assert (await queue.job(submitted.job_id)).results == {0: "first"}


async def test_wait_returns_on_completion_and_times_out_while_pending(queue: JobQueue) -> None:
    submitted = await queue.submit("v", items(1), total=1, prefilled={})
    started = time.monotonic()
    record = await queue.wait(submitted.job_id, 0.3)
    assert not record.is_done and time.monotonic() - started >= 0.25

    async def finish() -> None:
        [delivery] = await queue.claim("v", "c", 1, block_s=1)
        await asyncio.sleep(0.2)
        await queue.complete("v", [(delivery, "r")])

    task = asyncio.create_task(finish())
    started = time.monotonic()
    record = await queue.wait(submitted.job_id, 10)
    await task
    assert record.is_done and time.monotonic() - started < 5


async def test_a_job_of_prefilled_results_only_is_done_at_once(queue: JobQueue) -> None:
    submitted = await queue.submit("v", [], total=2, prefilled={0: "a", 1: "b"})
    record = await queue.wait(submitted.job_id, 5)
    assert record.is_done and record.results == {0: "a", 1: "b"}


async def test_an_idle_entry_is_redelivered_with_its_delivery_count(queue: JobQueue) -> None:
    await queue.submit("v", items(1), total=1, prefilled={})
    [first] = await queue.claim("v", "dead-worker", 1, block_s=0.1)
    assert await queue.claim("v", "other", 1, block_s=0.1) == []
    await asyncio.sleep(VISIBILITY_S + 0.2)
    [again] = await queue.claim("v", "other", 1, block_s=0.5)
    assert again.entry_id == first.entry_id and again.payload == first.payload
    assert again.deliveries == 2


async def test_extend_keeps_an_entry_from_other_workers(queue: JobQueue) -> None:
    await queue.submit("v", items(1), total=1, prefilled={})
    [delivery] = await queue.claim("v", "busy", 1, block_s=0.1)
    for _ in range(4):
        await asyncio.sleep(VISIBILITY_S / 2)
        await queue.extend("v", "busy", [delivery.entry_id])
    assert await queue.claim("v", "other", 1, block_s=0.05) == []


async def test_a_released_entry_is_claimed_at_once_by_another_worker(queue: JobQueue) -> None:
    await queue.submit("v", items(2), total=2, prefilled={})
    held = await queue.claim("v", "stopping", 2, block_s=0.1)
    await queue.release("v", "stopping", [held[0].entry_id])
    taken = await queue.claim("v", "other", 5, block_s=0.1)  # well inside the visibility timeout
    assert [(d.entry_id, d.deliveries) for d in taken] == [(held[0].entry_id, 2)]


async def test_a_retired_worker_is_no_longer_live(queue: JobQueue) -> None:
    await queue.heartbeat("v", "w1")
    await queue.heartbeat("v", "w2")
    await queue.retire("v", "w1")
    assert await queue.live_workers("v", within_s=60) == 1


async def test_a_full_queue_refuses_with_retry_after(queue: JobQueue) -> None:
    await queue.submit("v", items(8), total=8, prefilled={})
    with pytest.raises(QueueFull) as caught:
        await queue.submit("v", items(3), total=3, prefilled={})
    assert caught.value.retry_after_s and caught.value.http_status == 429
    assert await queue.depth("v") == 8


async def test_idempotency_key_returns_the_same_job_or_conflicts(queue: JobQueue) -> None:
    first = await queue.submit(
        "v", items(2), total=2, prefilled={}, idempotency_key="k", request_hash="h1"
    )
    again = await queue.submit(
        "v", items(2), total=2, prefilled={}, idempotency_key="k", request_hash="h1"
    )
    assert again.job_id == first.job_id and not again.created
    assert await queue.depth("v") == 2
    with pytest.raises(IdempotencyConflict):
        await queue.submit(
            "v", items(2), total=2, prefilled={}, idempotency_key="k", request_hash="h2"
        )


async def test_an_idempotency_key_names_its_job_on_its_verifier_only(queue: JobQueue) -> None:
    first = await queue.submit(
        "v", items(1), total=1, prefilled={}, idempotency_key="k", request_hash="h1"
    )
    assert await queue.job_of_key("v", "k") == first.job_id
    assert await queue.job_of_key("w", "k") is None
    assert await queue.job_of_key("v", "other") is None


async def test_unknown_job_is_not_found(queue: JobQueue) -> None:
    with pytest.raises(JobNotFound):
        await queue.job("no-such-job")


async def test_dead_letter_heartbeat_and_stats(queue: JobQueue) -> None:
    await queue.submit("v", items(1), total=1, prefilled={})
    [delivery] = await queue.claim("v", "c", 1, block_s=0.1)
    await queue.dead_letter("v", delivery, "test")
    await queue.heartbeat("v", "c")
    assert await queue.live_workers("v", within_s=5) == 1
    await queue.incr_stats("v", {"scored": 2})
    await queue.incr_stats("v", {"scored": 1, "error:timeout": 1})
    # Every entry ever dead-lettered is counted (the stream keeps the newest only).
    assert await queue.stats("v") == {"scored": 3, "error:timeout": 1, "dead_lettered": 1}


async def test_dead_letters_keep_the_newest_and_count_the_dropped(queue: JobQueue) -> None:
    await queue.submit("v", items(5), total=5, prefilled={})
    for delivery in await queue.claim("v", "c", 5, block_s=0.1):
        await queue.dead_letter("v", delivery, "test")
    sizes = await queue.store_sizes("v")
    assert (sizes["dead_letters"], sizes["dead_letters_dropped"]) == (3, 2)
    assert (await queue.stats("v"))["dead_lettered"] == 5


async def test_utilisation_sums_the_live_workers_that_report_a_pool(queue: JobQueue) -> None:
    assert await queue.utilisation("v", within_s=5) == (0, 0)
    await queue.heartbeat("v", "a", (3, 4))
    await queue.heartbeat("v", "b", (1, 2))
    await queue.heartbeat("v", "c")  # no pool of its own
    await queue.heartbeat("w", "d", (9, 9))
    assert await queue.utilisation("v", within_s=5) == (4, 6)
    await queue.heartbeat("v", "a", (0, 4))
    assert await queue.utilisation("v", within_s=5) == (1, 6)
    await queue.retire("v", "b")
    assert await queue.utilisation("v", within_s=5) == (0, 4)


async def test_backend_load_sums_the_live_workers_that_report_a_backend(queue: JobQueue) -> None:
    assert await queue.backend_load("v", within_s=5) == (0, 0)
    await queue.heartbeat("v", "a", None, (5, 8))
    await queue.heartbeat("v", "b", (1, 2), (2, 8))
    await queue.heartbeat("v", "c", (3, 4))  # a pool and no backend
    assert await queue.backend_load("v", within_s=5) == (7, 16)
    assert await queue.utilisation("v", within_s=5) == (4, 6)
    await queue.retire("v", "a")
    assert await queue.backend_load("v", within_s=5) == (2, 8)


async def test_the_oldest_entry_is_the_first_not_yet_completed(queue: JobQueue) -> None:
    assert await queue.oldest_entry("v") is None
    await queue.submit("v", items(2), total=2, prefilled={})
    await queue.submit("v", items(1, start=2), total=1, prefilled={})
    first, second = await queue.claim("v", "c", 2, block_s=0.05)
    assert await queue.oldest_entry("v") == first.entry_id
    await queue.complete("v", [(first, "{}")])
    assert await queue.oldest_entry("v") == second.entry_id
    # Its id is Redis's <milliseconds>-<sequence>, whichever queue: /metrics reads its age.
    age = entry_age_s(second.entry_id)
    assert age is not None and 0 <= age < 3600
    [third] = await queue.claim("v", "c", 1, block_s=0.05)
    await queue.complete("v", [(second, "{}"), (third, "{}")])
    assert await queue.oldest_entry("v") is None


async def test_verifiers_have_separate_queues(queue: JobQueue) -> None:
    await queue.ensure_verifier("w")
    await queue.submit("v", items(1), total=1, prefilled={})
    assert await queue.claim("w", "c", 1, block_s=0.05) == []
    assert await queue.depth("w") == 0 and await queue.depth("v") == 1


async def test_a_refusal_is_recorded_per_verifier_and_cleared(queue: JobQueue) -> None:
    assert await queue.refusal("v") is None
    await queue.set_refusal("v", "bubblewrap not found")
    assert await queue.refusal("v") == "bubblewrap not found"
    assert await queue.refusal("w") is None
    await queue.set_refusal("v", None)
    assert await queue.refusal("v") is None


async def test_lua_key_functions_name_the_keys_of_the_key_module(
    redis_server: Any, key_prefix: str
) -> None:
    """The scripts derive job keys from ids with ``lua_functions``: they must name exactly
    the keys ``Keys`` names, or a finished job's results would outlive the done index."""
    keys = Keys(key_prefix)
    q = RedisStreamsQueue(
        redis_server.url, keys, max_queue_items=10, result_ttl_s=60, visibility_timeout_s=1
    )
    try:
        script = lua_functions() + (
            "return {job_key(ARGV[1], ARGV[2]), results_key(ARGV[1], ARGV[2]), "
            "done_jobs_key(ARGV[1])}"
        )
        job_id = "0123456789abcdef0123456789abcdef"
        named = await q.redis.eval(script, 0, key_prefix, job_id)
        assert named == [keys.job(job_id), keys.results(job_id), keys.done_jobs]
    finally:
        await q.aclose()


async def test_a_queue_whose_claims_are_cancellable_loses_nothing_to_a_cancelled_claim(
    queue: JobQueue,
) -> None:
    """The worker cancels a waiting claim on stop only when the queue says it may
    (``claim_cancellable``): an item that arrives as the claim is cancelled must stay
    claimable at once, not wait out the visibility timeout."""
    if not queue.claim_cancellable:
        pytest.skip(f"{queue.name}: a claim is awaited, never cancelled (claim_cancellable)")
    waiting = asyncio.create_task(queue.claim("v", "c1", 5, block_s=5))
    await asyncio.sleep(0.05)
    submitted = await queue.submit("v", items(1), total=1, prefilled={})
    waiting.cancel()
    taken = await asyncio.gather(waiting, return_exceptions=True)
    claimed = await queue.claim("v", "c2", 5, block_s=0.1)
    handed = [d for d in claimed if d.job_id == submitted.job_id]
    if isinstance(taken[0], list) and taken[0]:  # the claim returned before its cancel
        assert handed == []
    else:
        assert [d.deliveries for d in handed] == [1]
