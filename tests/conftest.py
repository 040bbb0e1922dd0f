"""Shared fixtures: a real Redis server, per-test key prefixes, and real service processes."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
import pytest
import redis

from tribunal.judge.testing import FakeJudgeScript, FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("TRIBUNAL_DATA_DIR", ROOT.parent / "shared" / "data"))
"""The public data sets (README, "Data"): ``TRIBUNAL_DATA_DIR``, else ``../shared/data``."""
FIXTURES = ROOT / "tests" / "fixtures"
"""Small files tests need always (with their sources and licences in its README)."""


def need_data(path: Path) -> Path:
    """Return ``path`` (a file or folder under ``DATA``) if it exists; else skip the test
    with one line saying where it was looked for, or fail it under ``CI=true``, where a
    missing data set is a broken set-up rather than a reason to test less."""
    if path.exists():
        return path
    message = f"data not found: {path} (set TRIBUNAL_DATA_DIR; README, 'Data')"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RedisServer:
    """A Redis server the tests may stop and start again (when the tests own it)."""

    url: str
    port: int
    process: subprocess.Popen[bytes] | None = None

    def stop(self) -> None:
        """Stop the server (only one this session started)."""
        assert self.process is not None, "cannot stop a Redis the tests did not start"
        self.process.terminate()
        self.process.wait(10)

    def start(self) -> None:
        """Start the server on its port (again)."""
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
        )
        client = redis.Redis(port=self.port)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        client.close()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """A real Redis: a throwaway ``redis-server`` on a free port, or TRIBUNAL_TEST_REDIS_URL."""
    given = os.environ.get("TRIBUNAL_TEST_REDIS_URL")
    if given:
        yield RedisServer(url=given, port=0)
        return
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    port = free_port()
    server = RedisServer(url=f"redis://127.0.0.1:{port}/0", port=port)
    server.start()
    yield server
    if server.process is not None and server.process.poll() is None:
        server.stop()


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A Redis server of this test alone, which it may stop and restart."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    port = free_port()
    server = RedisServer(url=f"redis://127.0.0.1:{port}/0", port=port)
    server.start()
    yield server
    if server.process is not None and server.process.poll() is None:
        server.stop()


@pytest.fixture
def key_prefix() -> str:
    """A key prefix of this test alone, so tests never see each other's keys."""
    return f"t{uuid.uuid4().hex[:10]}"


@dataclass
class RunningService:
    """A service started as real processes."""

    base_url: str
    processes: dict[str, subprocess.Popen[bytes]]
    logs: dict[str, Path]
    env: dict[str, str] = field(default_factory=dict)

    def client(self, timeout_s: float = 60.0) -> httpx.Client:
        """An HTTP client for the service."""
        return httpx.Client(base_url=self.base_url, timeout=timeout_s)

    def log_text(self) -> str:
        """Every process's log."""
        return "\n".join(f"--- {name}\n{path.read_text()}" for name, path in self.logs.items())


def start_process(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a session of its own, output to ``log``."""
    with log.open("wb") as out:
        return subprocess.Popen(
            argv,
            env={**os.environ, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=ROOT,
        )


def stop_process(process: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """SIGTERM the process group, then SIGKILL it after ``grace_s``; then SIGKILL what its
    descendants in sessions of their own (``tribunal up``'s children) left running."""
    if process.poll() is not None:
        return
    try:
        descendants = psutil.Process(process.pid).children(recursive=True)
    except psutil.Error:
        descendants = []
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    _, alive = psutil.wait_procs(descendants, timeout=grace_s)
    for child in alive:
        with contextlib.suppress(psutil.Error):
            child.kill()
    psutil.wait_procs(alive, timeout=grace_s)


def wait_ready(
    base_url: str, timeout_s: float, processes: dict[str, subprocess.Popen[bytes]]
) -> None:
    """Poll ``/readyz`` until it answers 200, failing early if a process died."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for name, process in processes.items():
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited with code {process.returncode}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{base_url}/readyz", timeout=2).status_code == 200:
                return
        time.sleep(0.1)
    raise TimeoutError(f"{base_url} not ready within {timeout_s} s")


TRIBUNAL = [sys.executable, "-m", "tribunal.core.cli"]


@pytest.fixture
def service(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[..., RunningService]]:
    """Factory: ``service("math", workers=1, env={...})`` starts ``tribunal api`` and
    ``tribunal worker`` processes, waits for ``/readyz``, and stops them afterwards (their
    logs are printed when the test fails)."""
    started: list[RunningService] = []

    def start(
        name: str, *, workers: int = 1, env: dict[str, str] | None = None, ready_s: float = 60.0
    ) -> RunningService:
        port = free_port()
        full_env = {"TRIBUNAL_LOG_LEVEL": "INFO", **(env or {})}
        processes: dict[str, subprocess.Popen[bytes]] = {}
        logs: dict[str, Path] = {}
        argvs = {"api": [*TRIBUNAL, "api", name, "--port", str(port)]}
        if full_env.get("TRIBUNAL_QUEUE") != "memory":
            for n in range(workers):
                argvs[f"worker{n}"] = [*TRIBUNAL, "worker", name]
        # Registered before anything starts, so the teardown stops whatever did start.
        running = RunningService(f"http://127.0.0.1:{port}", processes, logs, full_env)
        started.append(running)
        for label, argv in argvs.items():
            logs[label] = tmp_path / f"{name}-{label}.log"
            processes[label] = start_process(argv, full_env, logs[label])
        wait_ready(running.base_url, ready_s, processes)
        return running

    yield start
    failed = getattr(request.node, "rep_call", None)
    for running in started:
        for process in running.processes.values():
            stop_process(process)
        if failed is not None and failed.failed:
            print(running.log_text())


@pytest.fixture
def openai_compat_server() -> Iterator[FakeOpenAIServer]:
    """A fake OpenAI-compatible judge on a free port of 127.0.0.1, in a thread with its own
    event loop (verdict 2 unless a test scripts it). It stands in for vLLM, which needs a GPU
    and weights this machine does not have; everything on our side of the socket is real."""
    server = FakeOpenAIServer(FakeJudgeScript())
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Keep each phase's report on the test item, so fixtures can tell a failed test."""
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report
