"""Benchmarks' view of ``tribunal.testing.stack``, the one launcher tests and benchmarks share.

Kept for the benchmarks' imports: every process is started and stopped by the stack module
(its own session, SIGTERM then SIGKILL of the group on exit, whatever happened).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from tribunal.testing import stack
from tribunal.testing.stack import TRIBUNAL, free_port

__all__ = [
    "DATA",
    "ROOT",
    "data_file",
    "fake_judge_argv",
    "free_port",
    "processes",
    "redis_server",
    "tribunal",
    "wait_ready",
]

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("TRIBUNAL_DATA_DIR", ROOT.parent / "shared" / "data"))
"""The shared data sets (``$TRIBUNAL_DATA_DIR``, default ``../shared/data`` of the repo)."""


def data_file(relative: str) -> Path:
    """``DATA / relative``; where it is missing, exit 2 with the one line that names the command
    that gets it (``tribunal data fetch``).

    Raises:
        SystemExit: 2, the file is not there.
    """
    from tribunal.cli.datasets import DataMissing, require

    try:
        return require(relative, root=DATA) / relative
    except DataMissing as exc:
        print(exc, file=sys.stderr)
        raise SystemExit(2) from None


@contextlib.contextmanager
def redis_server() -> Iterator[str]:
    """A throwaway redis-server without persistence; yields its URL."""
    try:
        with stack.redis_server() as server:
            yield server.url
    except RuntimeError as exc:  # not installed
        raise SystemExit(str(exc)) from exc


@contextlib.contextmanager
def processes(
    argvs: list[list[str]], env: dict[str, str]
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Start processes in sessions of their own; stop their groups on exit."""
    started: list[subprocess.Popen[bytes]] = []
    try:
        for argv in argvs:
            started.append(stack.start_process(argv, env, cwd=ROOT))
        yield started
    finally:
        for process in started:
            stack.stop_process(process)


def fake_judge_argv(port: int, latency_ms: float, cap: int) -> list[str]:
    """argv of the fake OpenAI-compatible judge (``tribunal.llm.testing.fake_openai``) on
    ``port``: each call holds one of ``cap`` slots for ``latency_ms``; ``/stats`` answers 200
    once it serves."""
    argv = [sys.executable, "-m", "tribunal.llm.testing.fake_openai", "--port", str(port)]
    return [*argv, "--latency-ms", f"{latency_ms:g}", "--cap", str(cap)]


def tribunal(*args: str) -> list[str]:
    """argv of ``tribunal <args>`` with this interpreter."""
    return [*TRIBUNAL, *args]


def wait_ready(base_url: str, timeout_s: float = 60) -> None:
    """Poll /readyz until it answers 200."""
    try:
        stack.wait_ready(base_url, timeout_s)
    except TimeoutError as exc:
        raise SystemExit(str(exc)) from exc
