"""Picklable tasks for the process pool tests."""

from __future__ import annotations

import os
import time

from tribunal.wire.errors import QueueFull


def sleep_then_pid(seconds: float) -> int:
    """Sleep, then return the pid of the process that ran the task."""
    time.sleep(seconds)
    return os.getpid()


def crash() -> None:
    """Die the way a segfault or the OOM killer would: no exception, no answer."""
    os._exit(139)


def raise_value_error() -> None:
    """Raise an ordinary exception."""
    raise ValueError("inside the task")


class LimitExceeded(QueueFull):
    """A subclass whose constructor takes other arguments than the message."""

    def __init__(self, limit: int, *, retry_after_s: float) -> None:
        super().__init__(f"over the limit of {limit}", field="items", retry_after_s=retry_after_s)
        self.limit = limit


def raise_tribunal_error(which: str) -> None:
    """Raise a ``TribunalError`` with every field set, in the pool process."""
    if which == "queue_full":
        raise QueueFull("queue is full", field="items.3", retry_after_s=2.5)
    raise LimitExceeded(7, retry_after_s=1.5)


def task_for(kind: str, value: int) -> tuple[str, int, int]:
    """Return (kind, value, pid), or misbehave as ``kind`` says: ``hang``, ``crash``,
    ``bad`` (a ``TribunalError``), ``bug`` (any other exception)."""
    if kind == "hang":
        time.sleep(60)
    elif kind == "crash":
        os._exit(139)
    elif kind == "bad":
        raise QueueFull(f"bad item {value}", field="items")
    elif kind == "bug":
        raise ValueError(f"bug on item {value}")
    return kind, value, os.getpid()
