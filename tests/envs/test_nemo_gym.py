"""NeMo Gym's resources-server protocol served from Tribunal (``/nemo_gym/{math,code}``),
driven by NeMo Gym 0.4.0's own models and HTTP client code in a Python 3.12 venv of its own
(.venv-nemo-gym, built from requirements/protocol-envs/nemo-gym.txt by
``scripts/protocol_envs.sh`` with ``PYTHON`` a 3.12 interpreter), against real processes: the
math and code services and the environment server."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import ROOT, RunningService, stop_tree
from tribunal.testing.stack import free_port, start_process, wait_ready

pytestmark = pytest.mark.e2e

MEMORY = {"TRIBUNAL_QUEUE": "memory", "TRIBUNAL_MATH_PROCESSES": "1"}


def python312() -> str:
    """A Python 3.12: ``$TRIBUNAL_PYTHON312``, pyenv's, or ``python3.12`` on the PATH (what
    ``make protocol-envs`` takes)."""
    pyenv = sorted((Path.home() / ".pyenv" / "versions").glob("3.12.*/bin/python"))
    found = (
        os.environ.get("TRIBUNAL_PYTHON312")
        or (str(pyenv[-1]) if pyenv else None)
        or shutil.which("python3.12")
    )
    if found is None:
        pytest.fail("no Python 3.12 (set TRIBUNAL_PYTHON312): NeMo Gym 0.4 needs it")
    return found


@pytest.fixture(scope="session")
def nemo_gym_python() -> Path:
    """The venv of NeMo Gym 0.4.0 on Python 3.12, built once from its lock."""
    script = ROOT / "scripts" / "protocol_envs.sh"
    subprocess.run(
        [str(script), "venv", "nemo-gym"], check=True, env={**os.environ, "PYTHON": python312()}
    )
    return ROOT / ".venv-nemo-gym" / "bin" / "python"


def test_nemo_gyms_client_verifies_with_tribunal(
    service: Callable[..., RunningService], nemo_gym_python: Path, tmp_path: Path
) -> None:
    math = service("math", env=MEMORY)
    code = service("code", env=MEMORY)
    port, broken_port = free_port(), free_port()
    servers = [
        start_process(
            [sys.executable, "-m", "tribunal.envs", "--port", str(port)],
            {"TRIBUNAL_ENVS_MATH_URL": math.base_url, "TRIBUNAL_ENVS_CODE_URL": code.base_url},
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
        driver = ROOT / "tests" / "envs" / "nemo_gym_driver.py"
        done = subprocess.run(
            [str(nemo_gym_python), str(driver), url, broken_url],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr + (tmp_path / "envs.log").read_text()
        report = json.loads(done.stdout.strip().splitlines()[-1])
        # The example of docs/integrations.md, as written, in the client's own venv.
        page = (ROOT / "docs" / "integrations.md").read_text()
        blocks = re.findall(r"```python\n(.*?)```", page, re.S)
        [example] = [b for b in blocks if "nemo_gym" in b]
        ran = subprocess.run(
            [str(nemo_gym_python), "-c", example.replace("http://127.0.0.1:8105", url)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert ran.returncode == 0, ran.stderr
    finally:
        for server in servers:
            stop_tree(server)

    assert report["seed"] == 200
    # The message's output_text is graded; the reasoning item's \boxed{17} is not.
    assert report["math"] == [1.0, 0.0]
    assert report["code"] == 1.0
    assert report["no_answer"][0] == 422 and "expected_answer" in report["no_answer"][1]
    assert report["reverify"] == {"mode": "deterministic"}
    aggregate = report["aggregate"]
    assert aggregate["agent_metrics"]["mean/reward"] == pytest.approx(1 / 3)
    assert aggregate["agent_metrics"]["pass@k"] == 0.5
    assert [g["mean/reward"] for g in aggregate["group_level_metrics"]] == [0.5, 0.0]
    # A verifier that cannot be reached: 502 naming the error class, never a reward of 0.
    status, detail = report["broken"]
    assert status == 502 and detail.startswith("backend_unavailable")
