"""The curl examples of the README and of the docs (``docs/**/*.md``) work as written against
``tribunal up``."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, free_port, stop_tree, wait_ready

pytestmark = pytest.mark.e2e


def curl_commands() -> list[str]:
    """Every ``curl`` command of the README's and the docs' sh blocks, continuation lines
    joined."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    text = "\n".join(page.read_text() for page in pages)
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        joined = block.replace("\\\n", "")
        commands += [
            line.strip() for line in joined.splitlines() if line.strip().startswith("curl ")
        ]
    return commands


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_readme_curl_examples(tmp_path: Path, key_prefix: str) -> None:
    ports = {port: str(free_port()) for port in ("8100", "8101", "8102", "8103", "8104")}
    # The embedded queue, as `make up` runs on a machine without Redis (a TRIBUNAL_REDIS_URL
    # that was set would be waited for, never replaced by it).
    env = {
        **{k: v for k, v in os.environ.items() if k != "TRIBUNAL_REDIS_URL"},
        "TRIBUNAL_MATH_PORT": ports["8101"],
        "TRIBUNAL_CODE_PORT": ports["8102"],
        "TRIBUNAL_JUDGE_PORT": ports["8103"],
        "TRIBUNAL_CITATION_PORT": ports["8104"],
        "TRIBUNAL_GATEWAY_PORT": ports["8100"],
        **{
            f"TRIBUNAL_GATEWAY_{name}_URL": f"http://127.0.0.1:{ports[port]}"
            for name, port in (("MATH", "8101"), ("CODE", "8102"), ("JUDGE", "8103"))
        },
        "TRIBUNAL_GATEWAY_CITATION_URL": f"http://127.0.0.1:{ports['8104']}",
        "TRIBUNAL_QUEUE": "memory",
        "TRIBUNAL_KEY_PREFIX": key_prefix,
    }
    with (tmp_path / "up.log").open("wb") as log:
        up = subprocess.Popen(
            [sys.executable, "-m", "tribunal.cli", "up"],
            env=env,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        for port in ports.values():
            wait_ready(f"http://127.0.0.1:{port}", 60, {"tribunal up": up})
        commands = curl_commands()
        assert len(commands) >= 5
        job_id = None
        answers = []
        for command in commands:
            for documented, actual in ports.items():
                command = command.replace(f"localhost:{documented}", f"localhost:{actual}")
            if "<id>" in command:
                assert job_id is not None
                command = command.replace("<id>", job_id)
            run = subprocess.run(
                ["bash", "-c", command], capture_output=True, text=True, timeout=60
            )
            assert run.returncode == 0, (command, run.stderr)
            answer = json.loads(run.stdout)
            job_id = answer.get("job_id", job_id)
            answers.append(answer)
        math, job, polled, code, run, raw, judge, citation, error, mixed, specs, openrlhf = answers
        assert math["results"][0]["reward"] == 1.0
        assert math["results"][0]["details"]["extracted_answer"] == "\\frac{1}{2}"
        assert job["created"] is True
        assert polled["status"] == "done" and [r["reward"] for r in polled["results"]] == [1.0, 1.0]
        assert code["results"][0]["reward"] == 1.0 and code["results"][0]["details"]["all_passed"]
        assert run["stdout"] == "45\n" and run["exit_code"] == 0 and run["verdict"] == "accepted"
        assert raw["results"][0]["reward"] == 1.0
        assert (
            raw["results"][0]["details"]["extracted_code"] == "def add(a, b):\n    return a + b\n"
        )
        assert judge["results"][0]["error"]["code"] == "backend_unavailable"
        assert error["error"]["field"] == "items.0.ground_truth"
        cited = citation["results"][0]
        assert cited["reward"] == pytest.approx(5 / 6) and cited["details"]["precision"] == 0.75
        direct, tcr, refiner = mixed["results"]
        assert direct["reward"] == 1.0 and direct["verifier"]["name"] == "math"
        assert tcr["reward"] == pytest.approx(-0.9)  # wrong after one tool call
        assert tcr["details"]["sub_rewards"]["num_turns"]["details"]["tool_calls"] == 1
        assert refiner["reward"] is None
        assert refiner["error"]["code"] == "backend_unavailable"
        assert "rloo_math" in {spec["name"] for spec in specs["specs"]}
        assert openrlhf == {
            "rewards": [1.0, 0.0],
            "scores": [1.0, 0.0],
            "extra_logs": {"math": [1.0, 0.0]},
        }
    finally:
        stop_tree(up)
        print((tmp_path / "up.log").read_text())
