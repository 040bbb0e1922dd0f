"""``tribunal up``: the whole stack in the foreground, with Redis or without, and Ctrl-C."""

from __future__ import annotations

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


def run_up(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tribunal.core.cli", "up", "math", "judge"],
            env={**os.environ, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )


def interrupt_and_check_all_stopped(process: subprocess.Popen[bytes]) -> None:
    children = psutil.Process(process.pid).children(recursive=True)
    assert children, "tribunal up should have started child processes"
    process.send_signal(signal.SIGINT)
    assert process.wait(30) == 0
    _, alive = psutil.wait_procs(children, timeout=10)
    assert alive == [], f"left running: {alive}"


@pytest.mark.parametrize("with_redis", [False, True])
def test_up_serves_every_service_and_ctrl_c_stops_everything(
    with_redis: bool, tmp_path: Path, request: pytest.FixtureRequest, key_prefix: str
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
        env["TRIBUNAL_REDIS_URL"] = f"redis://127.0.0.1:{free_port()}/0"
    log = tmp_path / "up.log"
    process = run_up(env, log)
    try:
        wait_ready(f"http://127.0.0.1:{math_port}", 60, {"tribunal up": process})
        wait_ready(f"http://127.0.0.1:{judge_port}", 60, {"tribunal up": process})
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
        if process.poll() is None:
            process.kill()
        time.sleep(0.1)
        print(log.read_text())
    output = log.read_text()
    assert f"math: http://127.0.0.1:{math_port}" in output
    assert f"judge: http://127.0.0.1:{judge_port}" in output
    assert "no judge backend configured" in output
    if not with_redis:
        [line] = [line for line in output.splitlines() if line.startswith("queue:")]
        assert "embedded" in line and "nothing survives a restart" in line
