"""Helpers for benchmarks: a throwaway Redis and Tribunal processes on free ports."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("TRIBUNAL_DATA_DIR", ROOT.parent / "shared" / "data"))
"""The public data sets: ``TRIBUNAL_DATA_DIR``, else ``../shared/data`` beside the checkout."""


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def redis_server() -> Iterator[str]:
    """A throwaway redis-server without persistence; yields its URL."""
    if shutil.which("redis-server") is None:
        raise SystemExit("redis-server is not installed (apt-get install redis-server)")
    port = free_port()
    process = subprocess.Popen(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        time.sleep(0.3)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait(10)


@contextlib.contextmanager
def processes(
    argvs: list[list[str]], env: dict[str, str]
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Start processes in sessions of their own; SIGTERM (then SIGKILL) them on exit."""
    started = []
    try:
        for argv in argvs:
            started.append(
                subprocess.Popen(
                    argv,
                    env={**os.environ, **env},
                    cwd=ROOT,
                    start_new_session=True,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        yield started
    finally:
        for process in started:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in started:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)


def tribunal(*args: str) -> list[str]:
    """argv of ``tribunal <args>`` with this interpreter."""
    return [sys.executable, "-m", "tribunal.core.cli", *args]


def wait_ready(base_url: str, timeout_s: float = 60) -> None:
    """Poll /readyz until it answers 200."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{base_url}/readyz", timeout=2).status_code == 200:
                return
        time.sleep(0.1)
    raise SystemExit(f"{base_url} not ready within {timeout_s} s")
