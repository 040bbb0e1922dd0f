"""Work that grows with an item's size, kept off the event loop where the item is large.

A worker's loop also runs its heartbeats (a claim held past the visibility timeout without
one is taken by another worker: a second delivery, or a dead letter) and every other item's
I/O. Parsing, validating or comparing a 16 MiB item takes about a second of CPU; on the loop,
that second is every other task's. Small items stay on the loop: a thread hand-off costs more
than their work.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

INLINE_BYTES = 1 << 16
"""Work on at most this many bytes of input runs on the loop (well under a millisecond);
more goes to a thread."""


async def off_loop_if_large(size: int, work: Callable[..., T], *args: Any) -> T:
    """``work(*args)``: on the event loop where ``size`` (the bytes it reads) is at most
    :data:`INLINE_BYTES`, else in the loop's default executor (bounded: asyncio's
    ``min(32, cpus + 4)`` threads), so that the loop keeps turning while it runs (a CPU-bound
    thread gives the loop the interpreter every ``sys.getswitchinterval()``, 5 ms).

    Its exceptions propagate; a cancelled caller stops waiting, and the thread's work runs to
    its end (it cannot be interrupted).
    """
    if size <= INLINE_BYTES:
        return work(*args)
    return await asyncio.get_running_loop().run_in_executor(None, work, *args)
