"""Calls coalesced into chunks on the real process pool: results, errors and deadlines per item."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from tests.core.pool_tasks import sleep_then_pid, task_for
from tribunal.core.chunking import ChunkedCalls
from tribunal.core.pool import DeadlinePool
from tribunal.wire.errors import InternalError, QueueFull, ScoringTimeout


@pytest.fixture
def pool() -> Iterator[DeadlinePool]:
    pool = DeadlinePool(2)
    yield pool
    pool.close()


async def test_a_turns_calls_share_few_tasks_and_keep_their_order(pool: DeadlinePool) -> None:
    calls = ChunkedCalls(pool, task_for, timeout_s=5, max_chunk=8)
    results = await asyncio.gather(*(calls.run("ok", i) for i in range(32)))
    assert [value for _, value, _ in results] == list(range(32))
    # 32 calls over 2 processes, 8 per chunk: 4 tasks; each chunk ran in one process.
    pids = [pid for _, _, pid in results]
    assert all(len(set(pids[start : start + 8])) == 1 for start in range(0, 32, 8))


async def test_with_every_process_busy_a_turns_calls_go_in_full_chunks(
    pool: DeadlinePool,
) -> None:
    calls = ChunkedCalls(pool, task_for, timeout_s=5, max_chunk=8)
    busy = [asyncio.ensure_future(pool.run(sleep_then_pid, 0.5, timeout_s=5)) for _ in range(2)]
    await asyncio.sleep(0)
    assert pool.scheduled == 2
    results = await asyncio.gather(*(calls.run("ok", i) for i in range(8)))
    # Spread over 2 idle processes they would be 2 tasks of 4; queued behind busy ones, one.
    assert len({pid for _, _, pid in results}) == 1
    await asyncio.gather(*busy)


async def test_an_items_error_stays_its_own(pool: DeadlinePool) -> None:
    calls = ChunkedCalls(pool, task_for, timeout_s=5, max_chunk=8)
    kinds = ["ok", "bad", "ok", "bug", "ok", "ok", "ok", "ok"]
    results = await asyncio.gather(
        *(calls.run(kind, i) for i, kind in enumerate(kinds)), return_exceptions=True
    )
    assert isinstance(results[1], QueueFull) and results[1].message == "bad item 1"
    assert isinstance(results[3], InternalError) and "bug on item 3" in results[3].message
    assert [r[1] for i, r in enumerate(results) if i not in (1, 3)] == [0, 2, 4, 5, 6, 7]


@pytest.mark.slow
async def test_a_hanging_item_times_out_alone(pool: DeadlinePool) -> None:
    calls = ChunkedCalls(pool, task_for, timeout_s=1.0, max_chunk=4)
    started = time.monotonic()
    results = await asyncio.gather(
        *(calls.run("hang" if i == 2 else "ok", i) for i in range(8)), return_exceptions=True
    )
    assert isinstance(results[2], ScoringTimeout)
    assert [r[1] for i, r in enumerate(results) if i != 2] == [0, 1, 3, 4, 5, 6, 7]
    # the chunk's deadline, then the item's own: two deadlines, not one per chunk-mate
    assert time.monotonic() - started < 10


async def test_a_crash_fails_only_the_item_that_crashed(pool: DeadlinePool) -> None:
    calls = ChunkedCalls(pool, task_for, timeout_s=5, max_chunk=4)
    results = await asyncio.gather(
        *(calls.run("crash" if i == 1 else "ok", i) for i in range(4)), return_exceptions=True
    )
    assert isinstance(results[1], InternalError)
    assert [r[1] for i, r in enumerate(results) if i != 1] == [0, 2, 3]
