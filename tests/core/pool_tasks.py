"""Picklable tasks for the process pool tests."""

from __future__ import annotations

import os
import time


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
