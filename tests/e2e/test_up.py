"""``tribunal up``: the whole stack in the foreground, with Redis or without, and Ctrl-C."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from tests.conftest import ROOT, RedisServer, free_port, wait_ready

pytestmark = pytest.mark.e2e


def _ignore_sigint() -> None:  # pragma: no cover - runs in the child before exec
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def run_up(
    env: dict[str, str],
    log: Path,
    services: tuple[str, ...] = ("math", "judge"),
    sigint_ignored: bool = False,
) -> subprocess.Popen[bytes]:
    """Start ``tribunal up <services>``; ``sigint_ignored`` starts it as a shell starts a
    background job (SIGINT ignored, inherited across exec)."""
    base = {
        k: v for k, v in os.environ.items() if k not in ("TRIBUNAL_REDIS_URL", "TRIBUNAL_QUEUE")
    }
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tribunal.cli", "up", *services],
            env={**base, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            preexec_fn=_ignore_sigint if sigint_ignored else None,
        )


def kill_everything(process: subprocess.Popen[bytes], children: list[psutil.Process]) -> None:
    """Teardown whatever happened: SIGKILL the process groups of ``tribunal up``'s children
    (each has a session of its own) and ``tribunal up`` itself."""
    if process.poll() is None:
        children = [*children, *psutil.Process(process.pid).children(recursive=True)]
    for child in children:
        with contextlib.suppress(ProcessLookupError, psutil.Error):
            if child.is_running():
                os.killpg(child.pid, signal.SIGKILL)
    if process.poll() is None:
        process.kill()
        process.wait(10)


def interrupt_and_check_all_stopped(process: subprocess.Popen[bytes]) -> None:
    children = psutil.Process(process.pid).children(recursive=True)
    assert children, "tribunal up should have started child processes"
    process.send_signal(signal.SIGINT)
    assert process.wait(30) == 0
    _, alive = psutil.wait_procs(children, timeout=10)
    assert alive == [], f"left running: {alive}"


@pytest.mark.parametrize(
    ("with_redis", "sigint_ignored"), [(False, False), (True, False), (True, True)]
)
def test_up_serves_every_service_and_ctrl_c_stops_everything(
    with_redis: bool,
    sigint_ignored: bool,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    key_prefix: str,
) -> None:
    math_port, judge_port = free_port(), free_port()
    env = {
        "TRIBUNAL_MATH_PORT": str(math_port),
        "TRIBUNAL_JUDGE_PORT": str(judge_port),
        "TRIBUNAL_KEY_PREFIX": key_prefix,
    }
    if with_redis:
        redis: RedisServer = request.getfixturevalue("redis_server")
        env["TRIBUNAL_REDIS_URL"] = redis.url
    else:
        # No Redis configured at all: the embedded queue (a URL that was named would be
        # waited for, never silently replaced; see tests/faults/test_redis_down_at_start.py).
        env["TRIBUNAL_QUEUE"] = "memory"
    log = tmp_path / "up.log"
    process = run_up(env, log, sigint_ignored=sigint_ignored)
    children: list[psutil.Process] = []
    try:
        wait_ready(f"http://127.0.0.1:{math_port}", 60, {"tribunal up": process})
        wait_ready(f"http://127.0.0.1:{judge_port}", 60, {"tribunal up": process})
        children = psutil.Process(process.pid).children(recursive=True)
        body = {
            "items": [
                {
                    "id": "q1",
                    "response": "so the answer is \\boxed{\\frac{1}{2}}",
                    "ground_truth": "0.5",
                }
            ]
        }
        answer = httpx.post(f"http://127.0.0.1:{math_port}/v1/math/score", json=body, timeout=30)
        assert answer.json()["results"][0]["reward"] == 1.0
        ready = httpx.get(f"http://127.0.0.1:{math_port}/readyz").json()
        assert ready["checks"]["queue"] == ("redis" if with_redis else "memory")
        interrupt_and_check_all_stopped(process)
    finally:
        kill_everything(process, children)
        print(log.read_text())
    output = log.read_text()
    assert f"math: http://127.0.0.1:{math_port}" in output
    assert f"judge: http://127.0.0.1:{judge_port}" in output
    assert "no judge backend configured" in output
    if not with_redis:
        [line] = [line for line in output.splitlines() if line.startswith("queue:")]
        assert "embedded" in line and "nothing survives a restart" in line


def _wait_refused(url: str, process: subprocess.Popen[bytes]) -> httpx.Response:
    """Poll /readyz until it names the code verifier's refusal (the worker needs a moment)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, "tribunal up stopped"
        with contextlib.suppress(httpx.HTTPError):
            ready = httpx.get(f"{url}/readyz", timeout=5)
            if "refused.code" in ready.json().get("checks", {}):
                return ready
        time.sleep(0.3)
    raise AssertionError("code's /readyz never reported its refusal")


@pytest.mark.parametrize("with_redis", [False, True])
def test_a_service_that_cannot_start_leaves_the_others_running(
    with_redis: bool, tmp_path: Path, request: pytest.FixtureRequest, key_prefix: str
) -> None:
    math_port, code_port = free_port(), free_port()
    env = {
        "TRIBUNAL_MATH_PORT": str(math_port),
        "TRIBUNAL_CODE_PORT": str(code_port),
        "TRIBUNAL_KEY_PREFIX": key_prefix,
        # The sandbox is unavailable, as on a machine without bubblewrap.
        "TRIBUNAL_CODE_BWRAP_PATH": str(tmp_path / "no-bwrap"),
    }
    if with_redis:
        redis: RedisServer = request.getfixturevalue("redis_server")
        env["TRIBUNAL_REDIS_URL"] = redis.url
    else:
        env["TRIBUNAL_QUEUE"] = "memory"  # no Redis configured (a named one is waited for)
    log = tmp_path / "up.log"
    process = run_up(env, log, ("math", "code"))
    code_url = f"http://127.0.0.1:{code_port}"
    try:
        wait_ready(f"http://127.0.0.1:{math_port}", 60, {"tribunal up": process})
        ready = _wait_refused(code_url, process)
        assert ready.status_code == 503
        assert ready.json()["checks"]["workers.code"] == 0
        assert "bubblewrap not found" in ready.json()["checks"]["refused.code"]
        body = {"items": [{"id": "q", "response": "\\boxed{2}", "ground_truth": "2"}]}
        answer = httpx.post(f"http://127.0.0.1:{math_port}/v1/math/score", json=body, timeout=30)
        assert answer.json()["results"][0]["reward"] == 1.0
        # A submission to the refused verifier is answered at once, with the reason.
        run = httpx.post(f"{code_url}/v1/code/run", json={"language": "python", "code": "1"})
        assert run.status_code == 503, run.text
        error = run.json()["error"]
        assert error["code"] == "backend_unavailable" and "bubblewrap not found" in error["message"]
        time.sleep(1)
        assert process.poll() is None
        interrupt_and_check_all_stopped(process)
    finally:
        kill_everything(process, [])
        print(log.read_text())
    output = log.read_text()
    # Why, once (the code service's two verifiers share the one sandbox and the one line).
    assert sum("bubblewrap not found" in line for line in output.splitlines()) == 1


def test_a_worker_started_before_redis_waits_for_it(tmp_path: Path, key_prefix: str) -> None:
    # Clearing an old refusal at start must not turn "Redis is not up yet" into an exit.
    env = {
        **os.environ,
        "TRIBUNAL_REDIS_URL": f"redis://127.0.0.1:{free_port()}/0",
        "TRIBUNAL_KEY_PREFIX": key_prefix,
        "TRIBUNAL_MATH_PROCESSES": "1",
    }
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "tribunal.cli", "worker", "math"],
            env=env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        # Past start-up (verifiers started, refusal cleared or not), it retries every second.
        deadline = time.monotonic() + 60
        while log.read_text().count("tribunal.core.worker: the queue is unavailable") < 3:
            assert worker.poll() is None, f"the worker exited:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        assert worker.poll() is None
    finally:
        worker.terminate()
        try:
            worker.wait(15)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
