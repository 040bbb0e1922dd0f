"""A process pool with a hard deadline per task, for CPU-bound scoring.

A task that overruns its deadline has its process killed and replaced (Pebble's
``ProcessPool`` does the killing and replacing); the task's caller gets ``ScoringTimeout``
and the other tasks are unaffected. This is the deadline to rely on, rather than in-process
SIGALRM timeouts, which only work on the main thread (Math-Verify issues #50, #55).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import signal
from collections.abc import Callable, Sequence
from concurrent.futures import TimeoutError as FuturesTimeout
from typing import Any, TypeVar

from pebble import ProcessExpired, ProcessPool
from pebble.common.types import CONSTS as PEBBLE_CONSTS

from tribunal.wire.errors import InternalError, ScoringTimeout

T = TypeVar("T")


def _ignore_stop_signals() -> None:
    """Initializer of every pool process: ignore SIGTERM (pebble installs an exit handler in
    its workers, over what the forkserver passed down); the pool's owner stops them."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


SIGNALS_MODULE = "tribunal.core.pool_signals"
"""Preloaded first in the forkserver: pool processes ignore the SIGTERM their worker handles."""


class DeadlinePool:
    """Run functions in ``workers`` processes, each call under a hard deadline.

    Processes come from a forkserver whose ``preload`` modules are imported once, so that a
    replacement process starts in milliseconds rather than re-importing (sympy takes ~0.5 s).
    The forkserver and the pool processes ignore SIGTERM and SIGINT (``pool_signals``): a
    signal to the worker's process group stops the worker, which finishes the tasks in flight
    and then closes the pool, rather than killing the tasks under it.

    Args:
        workers: Number of processes.
        preload: Modules the forkserver imports before forking workers.
        max_tasks_per_process: Recycle a process after this many tasks (bounds memory growth
            of caches in long-lived workers); 0 never recycles.
    """

    def __init__(
        self, workers: int, preload: Sequence[str] = (), max_tasks_per_process: int = 10_000
    ) -> None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([SIGNALS_MODULE, *preload])
        # Pool processes ignore SIGTERM, so pebble's SIGTERM-then-wait (3 s by default) before
        # its SIGKILL would only delay every timeout: kill at once.
        PEBBLE_CONSTS.term_timeout = 0.0
        self.workers = workers
        self._scheduled = 0
        self._pool = ProcessPool(
            max_workers=workers,
            max_tasks=max_tasks_per_process,
            initializer=_ignore_stop_signals,
            context=context,
        )

    async def run(self, fn: Callable[..., T], *args: Any, timeout_s: float) -> T:
        """Run ``fn(*args)`` in a pool process and return its result.

        Args:
            fn: A picklable (module-level) function.
            args: Its picklable arguments.
            timeout_s: Hard deadline (s), counted from the moment a process starts the task.

        Raises:
            ScoringTimeout: The deadline passed; the process was killed and replaced.
            InternalError: The process died (signal, out of memory) while running the task.
            Exception: Whatever ``fn`` raised, re-raised as is.
        """
        future = self._pool.schedule(fn, args=args, timeout=timeout_s)
        self._scheduled += 1
        try:
            return await asyncio.wrap_future(future)
        except FuturesTimeout as exc:
            raise ScoringTimeout(f"scoring took longer than the {timeout_s:g} s deadline") from exc
        except ProcessExpired as exc:
            raise InternalError(
                f"the scoring process died (exit code {exc.exitcode}) before answering"
            ) from exc
        finally:
            self._scheduled -= 1

    @property
    def scheduled(self) -> int:
        """Tasks handed to the pool and not yet answered (running or waiting)."""
        return self._scheduled

    @property
    def busy(self) -> int:
        """Processes running a task now (tasks scheduled, at most ``workers``)."""
        return min(self._scheduled, self.workers)

    def close(self) -> None:
        """Stop the processes (running tasks are abandoned) and wait for them."""
        self._pool.stop()  # type: ignore[no-untyped-call]
        self._pool.join(timeout=10)
