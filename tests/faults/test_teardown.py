"""Teardowns leave nothing behind: ``stop_tree`` also ends the descendants that started
sessions of their own (as ``tribunal up``'s children do), which a signal to the process group
does not reach (issue 7: a timed-out test_up left 6 processes that broke a later test)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import psutil

from tests.conftest import start_process, stop_tree

SPAWNER = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # exits, leaving its child behind
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                         start_new_session=True)
print(child.pid, flush=True)
time.sleep(120)
"""


def test_stop_tree_ends_descendants_in_their_own_sessions(tmp_path: Path) -> None:
    log = tmp_path / "spawner.log"
    parent = start_process([sys.executable, "-c", SPAWNER], {}, log)
    deadline = time.monotonic() + 30
    while not log.read_text().strip():
        assert time.monotonic() < deadline, "the spawner did not start its child"
        time.sleep(0.05)
    child = psutil.Process(int(log.read_text().split()[0]))
    try:
        stop_tree(parent, grace_s=5)
        assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE
    finally:
        if child.is_running():
            child.kill()
