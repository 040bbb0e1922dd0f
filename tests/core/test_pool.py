"""The process pool's hard deadline: overrunning tasks are killed, processes replaced."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator

import psutil
import pytest

from tests.core.pool_tasks import (
    LimitExceeded,
    crash,
    raise_tribunal_error,
    raise_value_error,
    sleep_then_pid,
)
from tribunal.core.pool import DeadlinePool
from tribunal.wire.errors import InternalError, QueueFull, ScoringTimeout


@pytest.fixture
def pool() -> Iterator[DeadlinePool]:
    pool = DeadlinePool(2)
    yield pool
    pool.close()


async def test_an_overrunning_task_times_out_while_the_others_finish(pool: DeadlinePool) -> None:
    started = time.monotonic()
    results = await asyncio.gather(
        pool.run(sleep_then_pid, 60, timeout_s=0.5),
        *(pool.run(sleep_then_pid, 0.01, timeout_s=5) for _ in range(20)),
        return_exceptions=True,
    )
    assert isinstance(results[0], ScoringTimeout) and results[0].retryable
    assert all(isinstance(pid, int) for pid in results[1:])
    assert time.monotonic() - started < 5
    killed_pid_reused = await pool.run(sleep_then_pid, 0, timeout_s=5)
    assert isinstance(killed_pid_reused, int), "a replacement process serves new tasks"


async def test_a_dead_process_is_an_internal_error_and_is_replaced(pool: DeadlinePool) -> None:
    with pytest.raises(InternalError, match="died"):
        await pool.run(crash, timeout_s=5)
    assert isinstance(await pool.run(sleep_then_pid, 0, timeout_s=5), int)


async def test_exceptions_of_the_task_come_back_as_they_are(pool: DeadlinePool) -> None:
    with pytest.raises(ValueError, match="inside the task"):
        await pool.run(raise_value_error, timeout_s=5)


async def test_tribunal_errors_cross_the_pool_as_themselves(pool: DeadlinePool) -> None:
    with pytest.raises(QueueFull) as full:
        await pool.run(raise_tribunal_error, "queue_full", timeout_s=5)
    error = full.value
    assert type(error) is QueueFull
    assert (error.message, error.field, error.retry_after_s) == ("queue is full", "items.3", 2.5)
    assert error.retryable and error.code == "queue_full" and str(error) == "queue is full"
    # A subclass with its own constructor arguments comes back whole, its own field included.
    with pytest.raises(LimitExceeded) as limit:
        await pool.run(raise_tribunal_error, "limit", timeout_s=5)
    assert limit.value.limit == 7 and limit.value.retry_after_s == 1.5
    assert limit.value.message == "over the limit of 7" and limit.value.field == "items"


async def test_sigterm_to_the_pool_processes_does_not_kill_the_tasks(pool: DeadlinePool) -> None:
    # SIGTERM to a worker's process group reaches its pool processes too; the worker handles
    # it (it finishes what it holds), so the tasks under it must survive (issue 7).
    running = asyncio.ensure_future(pool.run(sleep_then_pid, 1.5, timeout_s=30))
    await asyncio.sleep(0.5)
    pool_processes = [
        p
        for p in psutil.Process().children(recursive=True)
        if "forkserver" in " ".join(p.cmdline())
    ]
    assert len(pool_processes) >= 2  # the forkserver and its pool processes
    for process in pool_processes:
        process.send_signal(signal.SIGTERM)
    assert isinstance(await running, int)
    assert isinstance(await pool.run(sleep_then_pid, 0, timeout_s=5), int)
