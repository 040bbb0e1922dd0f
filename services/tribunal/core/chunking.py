"""Coalesce concurrent calls to a process pool into chunks: one pool task for several items.

A pool task has a fixed cost in the calling process (pickling, Pebble's channel and
futures, a wake-up per result) that is close to the cost of a cheap item itself: with one
task per item, a worker process spends about as much CPU handing items over as its pool
spends scoring them (``bench/scaling.py``). :class:`ChunkedCalls` gathers the calls made in
the same event-loop turn (the items of a claimed batch all arrive together) and sends them
in chunks of up to ``max_chunk`` items, spread over the pool's idle processes (full chunks
when none is idle).

The hard deadline stays per item: a chunk runs under the deadline of one item, so a chunk
of normal items finishes far inside it, and a chunk that overruns it (or whose process
dies) is retried one item per task, each under its own deadline. A hanging item thus gets
its ``timeout`` after two deadlines, and its chunk-mates their results after one.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from tribunal.core.pool import DeadlinePool
from tribunal.wire.errors import InternalError, ScoringTimeout, TribunalError

T = TypeVar("T")

Args = tuple[Any, ...]


def call_each(fn: Callable[..., T], calls: Sequence[Args]) -> list[T | TribunalError]:
    """Run ``fn(*args)`` for each ``args`` in a pool process; an item's error is its result.

    A ``TribunalError`` is returned as it is (it pickles); any other exception becomes an
    ``InternalError`` naming it, so that one item's failure never fails its chunk-mates.
    """
    results: list[T | TribunalError] = []
    for args in calls:
        try:
            results.append(fn(*args))
        except TribunalError as exc:
            results.append(exc)
        except Exception as exc:
            results.append(InternalError(f"{type(exc).__name__}: {exc}"))
    return results


class ChunkedCalls(Generic[T]):
    """Run ``fn`` in ``pool``, coalescing the calls of one event-loop turn into chunks.

    Args:
        pool: The process pool (its ``workers`` decides how a turn's calls are spread).
        fn: A picklable module-level function, the one each item needs.
        timeout_s: Hard deadline of one item (s); a chunk gets the same deadline.
        max_chunk: Most items in one pool task.
    """

    def __init__(
        self, pool: DeadlinePool, fn: Callable[..., T], *, timeout_s: float, max_chunk: int = 8
    ) -> None:
        if max_chunk < 1:
            raise ValueError("max_chunk must be >= 1")
        self.pool = pool
        self.fn = fn
        self.timeout_s = timeout_s
        self.max_chunk = max_chunk
        self._pending: list[tuple[Args, asyncio.Future[T]]] = []
        self._tasks: set[asyncio.Task[None]] = set()

    async def run(self, *args: Any) -> T:
        """Return ``fn(*args)`` computed in the pool.

        Raises:
            ScoringTimeout: The item overran its deadline (alone in its task).
            InternalError: Its process died while running it alone.
            TribunalError: Whatever ``fn`` raised for this item.
        """
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        if not self._pending:
            asyncio.get_running_loop().call_soon(self._flush)
        self._pending.append((args, future))
        return await future

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        # Spread over the idle processes; with none idle, tasks wait in the pool's queue
        # anyway, and full chunks cost the fewest hand-overs.
        idle = self.pool.workers - self.pool.scheduled
        size = self.max_chunk if idle <= 0 else math.ceil(len(pending) / idle)
        size = max(1, min(self.max_chunk, size))
        for start in range(0, len(pending), size):
            task = asyncio.create_task(self._run_chunk(pending[start : start + size]))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _run_chunk(self, chunk: list[tuple[Args, asyncio.Future[T]]]) -> None:
        calls = [args for args, _ in chunk]
        try:
            if len(chunk) == 1:
                outcomes: list[Any] = [await self._run_one(calls[0])]
            else:
                outcomes = await self.pool.run(call_each, self.fn, calls, timeout_s=self.timeout_s)
        except (ScoringTimeout, InternalError):
            # Overran or crashed as a whole: each item again alone, under its own deadline.
            outcomes = await asyncio.gather(*(self._run_one(args) for args in calls))
        except BaseException as exc:  # cancelled, or a bug: every caller hears of it
            outcomes = [exc] * len(chunk)
        for (_, future), outcome in zip(chunk, outcomes, strict=True):
            if future.done():
                continue
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)

    async def _run_one(self, args: Args) -> T | BaseException:
        try:
            return await self.pool.run(self.fn, *args, timeout_s=self.timeout_s)
        except Exception as exc:
            return exc
