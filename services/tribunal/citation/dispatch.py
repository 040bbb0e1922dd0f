"""Hand the citation verifier's CPU work to its scoring processes, smallest items first.

Every parse, gate, lexical judgment and score of an item runs in a ``DeadlinePool`` process;
the worker's event loop only validates the request and waits. At most ``pool.workers``
pool tasks are in flight; the calls waiting for one are kept in a heap ordered by the
item's size (characters of text, :func:`tribunal.citation.verifier.item_chars`), and each
task takes the smallest waiting calls, as many as fit in ``chunk_chars`` characters (at
least one, at most ``max_chunk``). So a small item that arrives behind a request of many
large ones waits for at most one task per process (the ones already running, each at most
``chunk_chars`` of text or a single larger item), never for the whole batch; and the calls
of small items share a hand-over (one pickling round trip per chunk, not per item), which
keeps the CPU per claim near what the worker's own process cost.

The deadline stays per item, as in ``tribunal.core.chunking``: a chunk runs under one
item's deadline, and a chunk that overruns it (or whose process dies) is run again one
call at a time, each under its own deadline, in the same slot.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tribunal.core.chunking import call_each
from tribunal.core.pool import DeadlinePool
from tribunal.wire.errors import InternalError, ScoringTimeout

T = TypeVar("T")


def apply(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``: lets one chunk hold calls of different functions (picklable)."""
    return fn(*args)


@dataclass(order=True)
class _Call:
    size: int
    seq: int
    fn: Callable[..., Any] = field(compare=False)
    args: tuple[Any, ...] = field(compare=False)
    future: asyncio.Future[Any] = field(compare=False)


class SmallestFirst:
    """Run calls in ``pool``, smallest item first, packed into chunks of bounded text.

    Args:
        pool: The scoring processes.
        timeout_s: Hard deadline of one item (s); a chunk gets the same deadline.
        chunk_chars: Most characters of text one chunk takes (a larger item goes alone).
        max_chunk: Most calls in one chunk.
    """

    def __init__(
        self,
        pool: DeadlinePool,
        *,
        timeout_s: float,
        chunk_chars: int = 16_384,
        max_chunk: int = 8,
    ) -> None:
        if max_chunk < 1 or chunk_chars < 1:
            raise ValueError("max_chunk and chunk_chars must be >= 1")
        self.pool = pool
        self.timeout_s = timeout_s
        self.chunk_chars = chunk_chars
        self.max_chunk = max_chunk
        self._waiting: list[_Call] = []
        self._seq = itertools.count()
        self._in_flight = 0
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def waiting(self) -> int:
        """Calls not yet handed to a process."""
        return len(self._waiting)

    async def run(self, size: int, fn: Callable[..., T], *args: Any) -> T:
        """Return ``fn(*args)`` computed in a scoring process.

        Args:
            size: The item's characters of text (its place in the queue and its chunk).
            fn: A picklable module-level function.
            args: Its picklable arguments.

        Raises:
            ScoringTimeout: The call overran its deadline (alone in its task).
            InternalError: Its process died while running it alone.
            TribunalError: Whatever ``fn`` raised.
        """
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, _Call(size, next(self._seq), fn, args, future))
        self._pump()
        return await future

    def _pump(self) -> None:
        while self._in_flight < self.pool.workers and self._waiting:
            chunk = self._take()
            if not chunk:
                continue
            self._in_flight += 1
            task = asyncio.create_task(self._run_chunk(chunk))
            self._tasks.add(task)
            task.add_done_callback(self._done)

    def _take(self) -> list[_Call]:
        """The smallest waiting calls that fit in one chunk (callers that gave up skipped)."""
        chunk: list[_Call] = []
        chars = 0
        while self._waiting and len(chunk) < self.max_chunk:
            call = self._waiting[0]
            if chunk and chars + call.size > self.chunk_chars:
                break
            heapq.heappop(self._waiting)
            if call.future.done():  # its caller was cancelled
                continue
            chunk.append(call)
            chars += call.size
        return chunk

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._in_flight -= 1
        self._pump()

    async def _run_chunk(self, chunk: list[_Call]) -> None:
        calls = [(call.fn, *call.args) for call in chunk]
        try:
            if len(chunk) == 1:
                outcomes: list[Any] = [await self._run_one(calls[0])]
            else:
                outcomes = await self.pool.run(call_each, apply, calls, timeout_s=self.timeout_s)
        except (ScoringTimeout, InternalError):
            # Overran or crashed as a whole: each call again alone, under its own deadline.
            outcomes = [await self._run_one(args) for args in calls]
        except BaseException as exc:  # cancelled, or a bug: every caller hears of it
            outcomes = [exc] * len(chunk)
        for call, outcome in zip(chunk, outcomes, strict=True):
            if call.future.done():
                continue
            if isinstance(outcome, BaseException):
                call.future.set_exception(outcome)
            else:
                call.future.set_result(outcome)

    async def _run_one(self, args: tuple[Any, ...]) -> Any:
        try:
            return await self.pool.run(apply, *args, timeout_s=self.timeout_s)
        except Exception as exc:
            return exc
