"""OpenEnv's reset / step / state served from Tribunal's environments (``/openenv/{env}``),
driven by the released ``openenv-core`` client (0.3.0, in .venv-openenv built from its own
hashed lock by ``scripts/protocol_envs.sh``) over its WebSocket, and over HTTP with its own
response models, against real processes (the math and code services, Redis and a worker for
the interpreter sessions, the environment server)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import ROOT, RedisServer, RunningService, need_data, redis_env, stop_tree
from tribunal.testing.stack import free_port, start_process, wait_ready

pytestmark = pytest.mark.e2e

KEY = "openenv-test-key"
MEMORY = {"TRIBUNAL_QUEUE": "memory", "TRIBUNAL_MATH_PROCESSES": "1"}


@pytest.fixture(scope="session")
def openenv_python() -> Path:
    """The venv of the ``openenv-core`` client, built once from its lock."""
    subprocess.run([str(ROOT / "scripts" / "protocol_envs.sh"), "venv", "openenv"], check=True)
    return ROOT / ".venv-openenv" / "bin" / "python"


def test_the_openenv_client_runs_episodes_over_websocket_and_http(
    service: Callable[..., RunningService],
    redis_server: RedisServer,
    key_prefix: str,
    openenv_python: Path,
    tmp_path: Path,
) -> None:
    need_data(ROOT.parent / "shared" / "data" / "math" / "gsm8k_test.jsonl")
    math = service("math", env=MEMORY)
    code = service("code", env=redis_env(redis_server, key_prefix))
    port, broken_port = free_port(), free_port()
    servers = [
        start_process(
            [sys.executable, "-m", "tribunal.envs", "--port", str(port)],
            {
                "TRIBUNAL_ENVS_MATH_URL": math.base_url,
                "TRIBUNAL_ENVS_CODE_URL": code.base_url,
                "TRIBUNAL_API_KEY": KEY,
            },
            tmp_path / "envs.log",
        ),
        start_process(
            [sys.executable, "-m", "tribunal.envs", "--port", str(broken_port)],
            {
                "TRIBUNAL_ENVS_MATH_URL": f"http://127.0.0.1:{free_port()}",
                "TRIBUNAL_ENVS_MAX_RETRIES": "0",
            },
            tmp_path / "broken.log",
        ),
    ]
    try:
        url, broken_url = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{broken_port}"
        wait_ready(url, 30, {"envs": servers[0]}, path="/health")
        wait_ready(broken_url, 30, {"envs": servers[1]}, path="/health")
        driver = ROOT / "tests" / "envs" / "openenv_driver.py"
        done = subprocess.run(
            [str(openenv_python), str(driver), url, KEY, broken_url],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr + (tmp_path / "envs.log").read_text()
        report = json.loads(done.stdout.strip().splitlines()[-1])
        # The example of docs/integrations.md, as written, in the client's own venv.
        page = (ROOT / "docs" / "integrations.md").read_text()
        blocks = re.findall(r"```python\n(.*?)```", page, re.S)
        [example] = [b for b in blocks if "GenericEnvClient" in b]
        example = example.replace("http://127.0.0.1:8105", url).replace("<key>", KEY)
        ran = subprocess.run(
            [str(openenv_python), "-c", example], capture_output=True, text=True, timeout=300
        )
        assert ran.returncode == 0, ran.stderr
    finally:
        for server in servers:
            stop_tree(server)

    reset = report["reset"]
    assert "Janet" in reset["observation"]["prompt"] and reset["reward"] is None
    assert reset["observation"]["task"] == {"split": "gsm8k_test", "index": 0, "id": "gsm8k/0"}
    # State kept across steps of the WebSocket's episode; tool steps are not graded.
    assert [c["observation"]["text"] for c in report["cells"]] == ["", "18\n"]
    assert all(c["reward"] is None and not c["done"] for c in report["cells"])
    assert report["state"]["step_count"] == 2 and report["state"]["done"] is False
    assert "VALIDATION_ERROR" in report["bad"]["error"] and "not_found" in report["bad"]["error"]
    assert report["submit"]["reward"] == 1.0 and report["submit"]["done"]
    assert "episode_finished" in report["after"]["error"]
    assert report["wrong"]["reward"] == 0.0
    # A verifier that cannot be reached: the protocol's error, named, never a reward of 0.
    broken = report["broken"]["error"]
    assert "EXECUTION_ERROR" in broken and "backend_unavailable" in broken
    assert report["http_reset"]["observation"]["task"]["split"] == "humaneval"
    assert report["http_step"]["reward"] == 1.0 and report["http_step"]["done"]
    assert report["http_no_key"] == 401
