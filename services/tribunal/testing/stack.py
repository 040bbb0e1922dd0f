"""One launcher for tests and benchmarks: a throwaway Redis and a service's processes.

``redis-server`` on a free port, without persistence or with an append-only file that survives
a restart on the same port; ``tribunal api <name>`` and ``tribunal worker <name>`` processes,
each in a session (process group) of its own, that may be signalled, waited for and started
again; a wait for ``/readyz`` that fails early when a process dies; and a stop that SIGTERMs
each process group, then SIGKILLs it, whatever happened (the verification and sandbox
processes of a worker go with it). ``tests/conftest.py``, ``bench/`` and the fault scenarios
(``bench/fault_scenarios.py``) all use it::

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
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tribunal.client import TribunalClient

TRIBUNAL = [sys.executable, "-m", "tribunal.cli"]
"""argv prefix of the ``tribunal`` command with this interpreter."""


_GIVEN_PORTS: set[int] = set()
_GIVEN_PORTS_LOCK = threading.Lock()


def free_port() -> int:
    """Return a TCP port of 127.0.0.1 nobody listens on right now, never one returned before.

    The kernel may hand the same free port to two binds in a row, and a caller usually picks
    several ports before any process binds them: a port already given out is skipped, or two
    services of one stack would race for it (the loser exits with "address already in use"
    while its readiness check is answered by the winner).
    """
    with _GIVEN_PORTS_LOCK:
        while True:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                port = int(sock.getsockname()[1])
            if port not in _GIVEN_PORTS:
                _GIVEN_PORTS.add(port)
                return port


@dataclass
class RedisServer:
    """A ``redis-server`` that its owner may stop and start again on the same port.

    Attributes:
        url: ``redis://127.0.0.1:<port>/0``.
        port: Its port (0 for a server given by URL, which this object does not own).
        process: The process, when this object started it.
        aof_dir: Where it keeps an append-only file, fsynced on every write, so that a stop
            (SIGTERM) and a start again lose nothing; None: no persistence at all.
    """

    url: str
    port: int
    process: subprocess.Popen[bytes] | None = None
    aof_dir: Path | None = None

    @classmethod
    def on_free_port(cls, aof_dir: Path | None = None) -> RedisServer:
        """A server (not started yet) on a port nobody listens on now."""
        port = free_port()
        return cls(url=f"redis://127.0.0.1:{port}/0", port=port, aof_dir=aof_dir)

    def start(self, ready_s: float = 10.0) -> None:
        """Start the server on its port (again), in a session of its own, and wait until it
        answers PING (after replaying its append-only file, if it has one).

        Raises:
            RuntimeError: ``redis-server`` is not installed.
            TimeoutError: It did not answer within ``ready_s``.
        """
        if shutil.which("redis-server") is None:
            raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
        argv = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        if self.aof_dir is None:
            argv += ["--appendonly", "no"]
        else:
            argv += ["--dir", str(self.aof_dir), "--appendonly", "yes", "--appendfsync", "always"]
        self.process = start_process(argv, {})
        deadline = time.monotonic() + ready_s
        while not _redis_answers(self.port):
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.stop()
                raise TimeoutError(f"redis-server on port {self.port} did not start")
            time.sleep(0.05)

    def stop(self, grace_s: float = 10.0) -> None:
        """Stop the server (only one this object started): SIGTERM, on which it flushes its
        append-only file and exits, then SIGKILL after ``grace_s`` (at once with 0). Stopping
        a stopped server does nothing."""
        assert self.process is not None, "cannot stop a Redis this object did not start"
        if self.process.returncode is None:
            stop_process(self.process, grace_s)


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
    server = RedisServer.on_free_port()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def start_process(
    argv: list[str], env: Mapping[str, str], log: Path | None = None, cwd: Path | None = None
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a session (process group) of its own, output appended to ``log``
    (or nowhere), with ``env`` on top of this process's environment."""
    out = log.open("ab") if log is not None else subprocess.DEVNULL
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
    """SIGTERM the process group, then SIGKILL it after ``grace_s`` seconds (at once with 0)."""
    if grace_s > 0 and process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(grace_s)
    # Children of the group (verification, sandbox processes) may outlive its leader.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def stop_processes(processes: Iterable[subprocess.Popen[bytes]], grace_s: float = 10.0) -> None:
    """:func:`stop_process` for several processes at once: SIGTERM every group first, then
    wait for them within one ``grace_s``, so that their shutdowns (a worker's drain, an API's
    lifespan) overlap instead of adding up; SIGKILL each group after it (at once with 0)."""
    processes = list(processes)
    if grace_s > 0:
        for process in processes:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for process in processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(max(deadline - time.monotonic(), 0.0))
    for process in processes:
        stop_process(process, 0)


def wait_ready(
    base_url: str,
    timeout_s: float,
    processes: Mapping[str, subprocess.Popen[bytes]] | None = None,
    path: str = "/readyz",
) -> None:
    """Poll ``path`` (``/readyz``; ``/stats`` of the fake LLM server) until it answers 200.

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
            if httpx.get(f"{base_url}{path}", timeout=2).status_code == 200:
                return
        time.sleep(0.1)
    raise TimeoutError(f"{base_url} not ready within {timeout_s} s")


@dataclass
class RunningService:
    """A service run as real processes: ``tribunal api <name>`` and its workers, each in a
    session of its own, which may be signalled, waited for and started again.

    Attributes:
        name: The service (``math``).
        base_url: ``http://127.0.0.1:<port>``.
        log_dir: Where each process appends its output, to ``<name>-<label>.log``.
        processes: ``api``, ``worker0`` ... by label (the latest process of each label).
        logs: Each process's log file by label.
        env: The ``TRIBUNAL_*`` variables its processes start with.
    """

    name: str
    base_url: str
    log_dir: Path
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    logs: dict[str, Path] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)

    @property
    def port(self) -> int:
        """The API's port."""
        return int(self.base_url.rsplit(":", 1)[1])

    def start(self, label: str, *args: str) -> subprocess.Popen[bytes]:
        """Start ``tribunal <args>`` as ``label``, which now names this process (a process
        started before under the label should have exited); return it."""
        self.logs[label] = self.log_dir / f"{self.name}-{label}.log"
        self.processes[label] = start_process([*TRIBUNAL, *args], self.env, self.logs[label])
        return self.processes[label]

    def start_api(self) -> subprocess.Popen[bytes]:
        """Start ``tribunal api <name>`` on the service's port as ``api``."""
        return self.start("api", "api", self.name, "--port", str(self.port))

    def start_worker(self, n: int = 0) -> subprocess.Popen[bytes]:
        """Start ``tribunal worker <name> --workers 1`` as ``worker<n>``."""
        return self.start(f"worker{n}", "worker", self.name, "--workers", "1")

    def signal_group(self, label: str, sig: signal.Signals) -> None:
        """Send ``sig`` to the process group of ``label`` (its pool processes included)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.processes[label].pid, sig)

    def wait_exit(self, label: str, timeout_s: float) -> int:
        """Wait for ``label`` to exit; return its exit code (``-N``: killed by signal N).

        Raises:
            subprocess.TimeoutExpired: Still running after ``timeout_s``.
        """
        return self.processes[label].wait(timeout_s)

    def client(self, **kwargs: Any) -> TribunalClient:
        """Return a :class:`TribunalClient` of this service (keyword arguments passed on)."""
        return TribunalClient(self.base_url, **kwargs)

    def http(self, timeout_s: float = 60.0) -> httpx.Client:
        """Return a plain HTTP client of this service (for raw-protocol tests)."""
        return httpx.Client(base_url=self.base_url, timeout=timeout_s)

    def log(self, label: str) -> str:
        """The log of ``label`` (every process started under it), empty if none yet."""
        path = self.logs.get(label)
        return path.read_text(errors="replace") if path is not None and path.exists() else ""

    def log_text(self) -> str:
        """Every process's log."""
        return "\n".join(f"--- {label}\n{self.log(label)}" for label in self.logs)

    def stop(self, grace_s: float = 10.0) -> None:
        """Stop every process, at once (:func:`stop_processes`): SIGTERM to its group, then
        SIGKILL after ``grace_s`` (at once with 0)."""
        stop_processes(self.processes.values(), grace_s)


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
    full_env = {"TRIBUNAL_LOG_LEVEL": "INFO", **(env or {})}
    running = RunningService(
        name,
        f"http://127.0.0.1:{port or free_port()}",
        log_dir or Path(tempfile.mkdtemp(prefix=f"tribunal-{name}-")),
        env=full_env,
    )
    try:
        running.start_api()
        if full_env.get("TRIBUNAL_QUEUE") != "memory":
            for n in range(workers):
                running.start_worker(n)
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


VERIFIERS = ("math", "code", "judge", "citation")
"""The verifiers behind the gateway, in the order :func:`start_full_stack` starts them."""


@dataclass
class FullStack:
    """The four verifiers and the gateway as processes on one Redis (see
    :func:`start_full_stack`).

    Attributes:
        services: ``math``, ``code``, ``judge``, ``citation``, ``gateway`` by name.
    """

    services: dict[str, RunningService]

    @property
    def gateway_url(self) -> str:
        """The gateway's base URL (what a trainer is pointed at)."""
        return self.services["gateway"].base_url

    def processes(self) -> dict[str, subprocess.Popen[bytes]]:
        """Every process by ``<service>.<label>`` (``judge.worker0``)."""
        return {
            f"{name}.{label}": process
            for name, service in self.services.items()
            for label, process in service.processes.items()
        }

    def log_text(self) -> str:
        """Every process's log."""
        return "\n".join(service.log_text() for service in self.services.values())

    def stop(self, grace_s: float = 10.0) -> None:
        """Stop every process of every service, at once (:func:`stop_processes`)."""
        stop_processes(
            (p for service in self.services.values() for p in service.processes.values()), grace_s
        )


def start_full_stack(
    redis_url: str,
    *,
    env: Mapping[str, str] | None = None,
    service_env: Mapping[str, Mapping[str, str]] | None = None,
    log_dir: Path | None = None,
    ready_s: float = 120.0,
) -> FullStack:
    """Start math, code, judge, citation and the gateway, each as ``tribunal api`` and one
    ``tribunal worker`` process on the Redis at ``redis_url``, the gateway pointed at the
    four on their free ports; wait until every ``/readyz`` answers.

    Args:
        redis_url: The one Redis in the middle (``RedisServer.url``).
        env: ``TRIBUNAL_*`` variables of every process (key prefix, process counts ...).
        service_env: Per service name, variables of that service's processes only (the
            judge's backend, for example).
        log_dir: Where each process writes its log (default: a new temporary directory).
        ready_s: Deadline of each service's ``/readyz``, seconds.

    Returns:
        The running stack; on a failure to start every process is already stopped.
    """
    log_dir = log_dir or Path(tempfile.mkdtemp(prefix="tribunal-stack-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    common = {"TRIBUNAL_REDIS_URL": redis_url, "TRIBUNAL_QUEUE": "redis", **(env or {})}
    own = service_env or {}
    ports = {name: free_port() for name in (*VERIFIERS, "gateway")}
    urls = {
        f"TRIBUNAL_GATEWAY_{name.upper()}_URL": f"http://127.0.0.1:{ports[name]}"
        for name in VERIFIERS
    }
    stack = FullStack({})
    try:
        # All started first, then waited for: the slow starts (torch) overlap.
        for name, port in ports.items():
            extra = urls if name == "gateway" else {}
            service = RunningService(
                name,
                f"http://127.0.0.1:{port}",
                log_dir,
                env={"TRIBUNAL_LOG_LEVEL": "INFO", **common, **extra, **own.get(name, {})},
            )
            stack.services[name] = service
            service.start_api()
            service.start_worker()
        for service in stack.services.values():
            wait_ready(service.base_url, ready_s, stack.processes())
    except BaseException:
        stack.stop(0)
        raise
    return stack
