"""One launcher for tests and benchmarks: a throwaway Redis and a service's processes.

``redis-server`` on a free port without persistence; ``tribunal api <name>`` and
``tribunal worker <name>`` processes, each in a session (process group) of its own; a wait
for ``/readyz`` that fails early when a process dies; and a stop that SIGTERMs each process
group, then SIGKILLs it, whatever happened (the verification and sandbox processes of a
worker go with it). ``tests/conftest.py`` and ``bench/`` both use it::

    with redis_server() as redis, service_stack("math", redis_url=redis.url) as running:
        async with running.client() as client:
            results = await client.score("math", items)

Nothing here is needed in production; it ships in the package so that benchmarks and tests
of other projects can start a stack the same way.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tribunal.client import TribunalClient

TRIBUNAL = [sys.executable, "-m", "tribunal.core.cli"]
"""argv prefix of the ``tribunal`` command with this interpreter."""


def free_port() -> int:
    """Return a TCP port of 127.0.0.1 nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RedisServer:
    """A ``redis-server`` without persistence that its owner may stop and start again.

    Attributes:
        url: ``redis://127.0.0.1:<port>/0``.
        port: Its port (0 for a server given by URL, which this object does not own).
        process: The process, when this object started it.
    """

    url: str
    port: int
    process: subprocess.Popen[bytes] | None = None

    def start(self, ready_s: float = 10.0) -> None:
        """Start the server on its port (again) and wait until it answers PING.

        Raises:
            RuntimeError: ``redis-server`` is not installed.
            TimeoutError: It did not answer within ``ready_s``.
        """
        if shutil.which("redis-server") is None:
            raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
        argv = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
        self.process = subprocess.Popen(
            [*argv, "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL
        )
        deadline = time.monotonic() + ready_s
        while not _redis_answers(self.port):
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.stop()
                raise TimeoutError(f"redis-server on port {self.port} did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop the server (only one this object started)."""
        assert self.process is not None, "cannot stop a Redis this object did not start"
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _redis_answers(port: int) -> bool:
    """PING over a raw socket (no redis-py needed)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@contextlib.contextmanager
def redis_server() -> Iterator[RedisServer]:
    """Yield a throwaway ``redis-server`` on a free port; stop it on exit."""
    port = free_port()
    server = RedisServer(url=f"redis://127.0.0.1:{port}/0", port=port)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def start_process(
    argv: list[str], env: Mapping[str, str], log: Path | None = None, cwd: Path | None = None
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a session (process group) of its own, output to ``log`` (or
    nowhere), with ``env`` on top of this process's environment."""
    out = log.open("wb") if log is not None else subprocess.DEVNULL
    try:
        return subprocess.Popen(
            argv,
            env={**os.environ, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=cwd,
        )
    finally:
        if log is not None:
            out.close()  # type: ignore[union-attr]


def stop_process(process: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """SIGTERM the process group, then SIGKILL it after ``grace_s`` seconds."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(grace_s)
    # Children of the group (verification, sandbox processes) may outlive its leader.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def wait_ready(
    base_url: str,
    timeout_s: float,
    processes: Mapping[str, subprocess.Popen[bytes]] | None = None,
) -> None:
    """Poll ``/readyz`` until it answers 200.

    Raises:
        RuntimeError: One of ``processes`` exited meanwhile.
        TimeoutError: Not ready within ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for name, process in (processes or {}).items():
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited with code {process.returncode}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{base_url}/readyz", timeout=2).status_code == 200:
                return
        time.sleep(0.1)
    raise TimeoutError(f"{base_url} not ready within {timeout_s} s")


@dataclass
class RunningService:
    """A service started as real processes.

    Attributes:
        name: The service (``math``).
        base_url: ``http://127.0.0.1:<port>``.
        processes: ``api``, ``worker0`` ... by label.
        logs: Each process's log file by label.
        env: The ``TRIBUNAL_*`` variables it was started with.
    """

    name: str
    base_url: str
    processes: dict[str, subprocess.Popen[bytes]]
    logs: dict[str, Path]
    env: dict[str, str] = field(default_factory=dict)

    def client(self, **kwargs: Any) -> TribunalClient:
        """Return a :class:`TribunalClient` of this service (keyword arguments passed on)."""
        return TribunalClient(self.base_url, **kwargs)

    def http(self, timeout_s: float = 60.0) -> httpx.Client:
        """Return a plain HTTP client of this service (for raw-protocol tests)."""
        return httpx.Client(base_url=self.base_url, timeout=timeout_s)

    def log_text(self) -> str:
        """Every process's log."""
        return "\n".join(
            f"--- {name}\n{path.read_text(errors='replace')}"
            for name, path in self.logs.items()
            if path.exists()
        )

    def stop(self) -> None:
        """Stop every process (process groups: SIGTERM, then SIGKILL)."""
        for process in self.processes.values():
            stop_process(process)


def start_service(
    name: str,
    *,
    workers: int = 1,
    env: Mapping[str, str] | None = None,
    log_dir: Path | None = None,
    ready_s: float = 60.0,
    port: int | None = None,
) -> RunningService:
    """Start ``tribunal api <name>`` and ``workers`` worker processes (``tribunal worker <name>
    --workers 1`` each) and wait for ``/readyz``.

    Args:
        name: ``math``, ``code``, ``judge``.
        workers: Worker processes (none with ``TRIBUNAL_QUEUE=memory``: the API scores).
        env: ``TRIBUNAL_*`` variables (Redis URL, key prefix ...), on top of this process's.
        log_dir: Where each process writes its log (default: a new temporary directory).
        ready_s: Deadline of ``/readyz``, seconds.
        port: API port (default: a free one).

    Returns:
        The running service; on failure to become ready every process is already stopped.
    """
    port = port or free_port()
    full_env = {"TRIBUNAL_LOG_LEVEL": "INFO", **(env or {})}
    log_dir = log_dir or Path(tempfile.mkdtemp(prefix=f"tribunal-{name}-"))
    argvs = {"api": [*TRIBUNAL, "api", name, "--port", str(port)]}
    if full_env.get("TRIBUNAL_QUEUE") != "memory":
        for n in range(workers):
            argvs[f"worker{n}"] = [*TRIBUNAL, "worker", name, "--workers", "1"]
    running = RunningService(name, f"http://127.0.0.1:{port}", {}, {}, full_env)
    try:
        for label, argv in argvs.items():
            running.logs[label] = log_dir / f"{name}-{label}.log"
            running.processes[label] = start_process(argv, full_env, running.logs[label])
        wait_ready(running.base_url, ready_s, running.processes)
    except BaseException:
        running.stop()
        raise
    return running


@contextlib.contextmanager
def service_stack(
    name: str,
    *,
    redis_url: str | None = None,
    workers: int = 1,
    env: Mapping[str, str] | None = None,
    log_dir: Path | None = None,
    ready_s: float = 60.0,
) -> Iterator[RunningService]:
    """Yield a running service on Redis (its own throwaway one unless ``redis_url`` is
    given); stop every process on exit, whatever happened."""
    with contextlib.ExitStack() as stack:
        if redis_url is None:
            redis_url = stack.enter_context(redis_server()).url
        full_env = {"TRIBUNAL_REDIS_URL": redis_url, "TRIBUNAL_QUEUE": "redis", **(env or {})}
        running = start_service(
            name, workers=workers, env=full_env, log_dir=log_dir, ready_s=ready_s
        )
        stack.callback(running.stop)
        yield running
