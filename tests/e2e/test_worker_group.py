"""``tribunal worker <service>`` with TRIBUNAL_<NAME>_WORKERS > 1: real member processes on a
real Redis, scoring through a real API."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import psutil
import pytest

from tests.conftest import ROOT, RedisServer, RunningService, redis_env
from tribunal.core.worker_group import EXIT_REFUSED

pytestmark = pytest.mark.e2e

WORKER = [sys.executable, "-m", "tribunal.cli", "worker"]


def _members(group: subprocess.Popen[bytes]) -> list[psutil.Process]:
    return [p for p in psutil.Process(group.pid).children() if "--member" in p.cmdline()]


def _wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_a_math_worker_group_scores_with_every_member_and_stops_on_sigterm(
    service: Callable[..., RunningService],
    redis_server: RedisServer,
    key_prefix: str,
    tmp_path: Path,
) -> None:
    env = redis_env(redis_server, key_prefix, TRIBUNAL_MATH_PROCESSES="1")
    group_env = {**os.environ, **env, "TRIBUNAL_MATH_WORKERS": "2"}
    log = (tmp_path / "group.log").open("wb")
    group = subprocess.Popen([*WORKER, "math"], env=group_env, cwd=ROOT, stdout=log, stderr=log)
    try:
        _wait_for(lambda: len(_members(group)) == 2, "two members")
        members = _members(group)
        # The API alone: the group is the service's only worker command.
        running = service("math", workers=0, env=env)
        with httpx.Client(base_url=running.base_url, timeout=60) as client:
            _wait_for(
                lambda: client.get("/readyz").json()["checks"]["workers.math"] == 2,
                "both members to heartbeat",
            )
            items = [
                {"id": str(i), "response": f"#### {i}", "ground_truth": str(i)} for i in range(200)
            ]
            response = client.post("/v1/math/score", json={"items": items})
            assert response.status_code == 200, response.text
            assert [r["reward"] for r in response.json()["results"]] == [1.0] * 200
        group.send_signal(signal.SIGTERM)
        assert group.wait(30) == 0
        assert not any(m.is_running() and m.status() != psutil.STATUS_ZOMBIE for m in members)
    finally:
        if group.poll() is None:
            os.killpg(os.getpgid(group.pid), signal.SIGKILL)
            group.wait()
        log.close()


def test_a_member_that_dies_stops_the_group(
    redis_server: RedisServer, key_prefix: str, tmp_path: Path
) -> None:
    log = tmp_path / "group.log"
    env = {
        **os.environ,
        **redis_env(redis_server, key_prefix, TRIBUNAL_MATH_PROCESSES="1"),
        "TRIBUNAL_MATH_WORKERS": "2",
    }
    with log.open("wb") as out:
        group = subprocess.Popen([*WORKER, "math"], env=env, cwd=ROOT, stdout=out, stderr=out)
    try:
        _wait_for(lambda: len(_members(group)) == 2, "two members")
        killed, other = _members(group)
        killed.kill()
        # Seen from outside (tribunal up, a container's restart policy): the command exits
        # with the member's status, and the other member is stopped, not left behind.
        assert group.wait(30) == 128 + signal.SIGKILL
        assert "a worker exited with code -9; stopping the others" in log.read_text()
        other.wait(5)
    finally:
        if group.poll() is None:
            os.killpg(os.getpgid(group.pid), signal.SIGKILL)
            group.wait()


def test_a_code_worker_group_that_cannot_isolate_refuses_once(
    redis_server: RedisServer, key_prefix: str
) -> None:
    env = {
        **os.environ,
        **redis_env(redis_server, key_prefix),
        "TRIBUNAL_CODE_WORKERS": "3",
        "TRIBUNAL_CODE_BWRAP_PATH": "/nonexistent/bwrap",
    }
    group = subprocess.run(
        [*WORKER, "code"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert group.returncode == EXIT_REFUSED
    assert group.stderr.count("refusing to start") == 1, group.stderr


def test_workers_is_refused_for_a_service_that_runs_one_worker() -> None:
    done = subprocess.run(
        [*WORKER, "judge", "--workers", "2"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "judge runs one worker process" in done.stderr
