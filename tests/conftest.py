"""Shared fixtures: a real Redis server, per-test key prefixes, and real service processes.

Processes are started by ``tribunal.testing.stack``, the launcher the benchmarks use too;
its names are re-exported here for the tests that import them from this module.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from tribunal.llm.testing import FakeOpenAIServer, FakeScript
from tribunal.testing import stack
from tribunal.testing.stack import (
    TRIBUNAL,
    RedisServer,
    RunningService,
    free_port,
    start_service,
    stop_process,
    stop_processes,
    wait_ready,
)

__all__ = [
    "DATA",
    "ROOT",
    "TRIBUNAL",
    "RedisServer",
    "RunningService",
    "free_port",
    "start_process",
    "stop_process",
    "stop_tree",
    "wait_ready",
]

ROOT = Path(__file__).resolve().parents[1]

RENDEZVOUS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
"""What ``tribunal.trainer.engine.init_distributed`` sets in this process for an in-process
run (its process group then keeps MASTER_PORT bound here)."""


@pytest.fixture(autouse=True)
def _no_rendezvous_left_behind() -> Iterator[None]:
    """Take back the rendezvous variables an in-process training run set: a trainer started
    as a subprocess by a later test would otherwise inherit MASTER_PORT, a port this process
    still holds, and fail with EADDRINUSE (TRL's GRPOTrainer did, after tests/faults/)."""
    before = {name: os.environ.get(name) for name in RENDEZVOUS}
    yield
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


DATA = Path(os.environ.get("TRIBUNAL_DATA_DIR", ROOT.parent / "shared" / "data"))
"""The shared data sets (``$TRIBUNAL_DATA_DIR``, default ``../shared/data`` of the repo)."""
FIXTURES = ROOT / "tests" / "fixtures"
"""Small files tests need always (with their sources and licences in its README)."""


def stop_tree(process: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """``stop_process``, then SIGKILL what the process's descendants in sessions of their own
    (``tribunal up``'s children) left running: a signal to its group does not reach them."""
    try:
        descendants = psutil.Process(process.pid).children(recursive=True)
    except psutil.Error:
        descendants = []
    stop_process(process, grace_s)
    _, alive = psutil.wait_procs(descendants, timeout=grace_s)
    for child in alive:
        with contextlib.suppress(psutil.Error):
            child.kill()
    psutil.wait_procs(alive, timeout=grace_s)


def redis_env(redis: RedisServer, prefix: str, **extra: str) -> dict[str, str]:
    """``TRIBUNAL_*`` variables of a service on ``redis`` under the key prefix ``prefix``,
    plus ``extra``."""
    return {
        "TRIBUNAL_REDIS_URL": redis.url,
        "TRIBUNAL_QUEUE": "redis",
        "TRIBUNAL_KEY_PREFIX": prefix,
        **extra,
    }


def need_data(path: Path) -> Path:
    """Return ``path`` (a file or folder under ``DATA``) if it exists; else skip the test
    with one line saying where it was looked for, or fail it under ``CI=true``, where a
    missing data set is a broken set-up rather than a reason to test less."""
    if path.exists():
        return path
    message = f"data not found: {path} (set TRIBUNAL_DATA_DIR; docs/development.md, 'Data')"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


def start_process(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """Start ``argv`` in the repository root, in a session of its own, output to ``log``."""
    return stack.start_process(argv, env, log, cwd=ROOT)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """A real Redis: a throwaway ``redis-server`` on a free port, or TRIBUNAL_TEST_REDIS_URL."""
    given = os.environ.get("TRIBUNAL_TEST_REDIS_URL")
    if given:
        yield RedisServer(url=given, port=0)
        return
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    server = RedisServer.on_free_port()
    server.start()
    yield server
    if server.process is not None and server.process.poll() is None:
        server.stop()


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A Redis server of this test alone, which it may stop and restart."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    server = RedisServer.on_free_port()
    server.start()
    yield server
    if server.process is not None and server.process.poll() is None:
        server.stop()


@pytest.fixture
def key_prefix() -> str:
    """A key prefix of this test alone, so tests never see each other's keys."""
    return f"t{uuid.uuid4().hex[:10]}"


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
        running = start_service(name, workers=workers, env=env, log_dir=tmp_path, ready_s=ready_s)
        started.append(running)
        return running

    yield start
    failed = getattr(request.node, "rep_call", None)
    # Every service's processes at once: their shutdowns overlap.
    stop_processes(p for running in started for p in running.processes.values())
    if failed is not None and failed.failed:
        for running in started:
            print(running.log_text())


@contextlib.contextmanager
def shared_service(
    request: pytest.FixtureRequest, name: str, *, env: dict[str, str], workers: int = 1
) -> Iterator[RunningService]:
    """A service started once for the tests of a module (or session) fixture that only score
    through it: a start costs seconds. Its logs are printed if one of those tests failed.

    Args:
        request: The fixture's request.
        name: The service (``math``).
        env: ``TRIBUNAL_*`` variables of its processes.
        workers: Worker processes.
    """
    failed = request.session.testsfailed
    with tempfile.TemporaryDirectory(prefix=f"tribunal-{name}-") as log_dir:
        running = start_service(name, workers=workers, env=env, log_dir=Path(log_dir))
        try:
            yield running
        finally:
            running.stop()
            if request.session.testsfailed > failed:
                print(running.log_text())


@pytest.fixture
def openai_compat_server() -> Iterator[FakeOpenAIServer]:
    """A fake OpenAI-compatible judge on a free port of 127.0.0.1, in a thread with its own
    event loop (verdict 2 unless a test scripts it). It stands in for vLLM, which needs a GPU
    and weights this machine does not have; everything on our side of the socket is real."""
    server = FakeOpenAIServer(FakeScript())
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


E2E_FOLDERS = frozenset({"e2e", "faults", "integrations"})
"""Every test under these folders starts the stack's processes (or a trainer's): it is ``e2e``
whatever its module says, so that the fast lane (``make test-fast``) never runs one."""


OTHER_ENVIRONMENTS = frozenset(
    {
        "envs/test_nemo_gym.py",
        "envs/test_openenv.py",
        "envs/test_ors.py",
        "envs/test_rubrics.py",
        "envs/test_trl_ors.py",
        "integrations/test_openrlhf.py",
        "integrations/test_trainer_envs.py",
        "integrations/test_verl.py",
    }
)
"""The modules that run another project's released code in that project's own venv (a
trainer's, ``scripts/trainer_envs.sh``, or a protocol client's, ``scripts/protocol_envs.sh``):
they are ``extended``, the lane CI runs beside the suite (``make test-extended``), with the
benchmarks' quick runs (tests/bench/test_runner.py marks those)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test under one of :data:`E2E_FOLDERS` ``e2e``, and each of
    :data:`OTHER_ENVIRONMENTS` ``extended``."""
    root = Path(__file__).resolve().parent
    for item in items:
        path = item.path.resolve()
        if not path.is_relative_to(root):
            continue
        relative = path.relative_to(root)
        if relative.parts[0] in E2E_FOLDERS:
            item.add_marker(pytest.mark.e2e)
        if relative.as_posix() in OTHER_ENVIRONMENTS:
            item.add_marker(pytest.mark.extended)
