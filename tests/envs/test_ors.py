"""The Open Reward Standard served from Tribunal's environments (``python -m tribunal.envs``),
driven by the released ``openreward`` client (0.1.167, in .venv-openreward built from its own
hashed lock by ``scripts/protocol_envs.sh``) against real processes: the folder's stack (the
math service, the code service with its worker and Redis, the environment server) and, for the
refiner, a gateway over the judge (a fake model) and the citation scorer."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import ROOT, RunningService, need_data, stop_tree
from tests.envs.conftest import (
    KEY,
    MEMORY,
    EnvsStack,
    client_python,
    docs_examples,
    run_docs_example,
    run_driver,
)
from tribunal.llm.testing import FakeOpenAIServer, FakeScript
from tribunal.testing.stack import free_port, start_process, wait_ready

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="session")
def openreward_python() -> Path:
    """The venv of the ``openreward`` client."""
    return client_python("openreward")


def test_the_openreward_client_runs_math_and_code_episodes(
    envs_stack: EnvsStack, openreward_python: Path
) -> None:
    stack = envs_stack
    args = ("episodes", stack.url, KEY, stack.broken_url)
    done = run_driver(openreward_python, "ors_driver.py", *args, log=stack.log)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    # The example of docs/integrations.md, as written, in the client's own venv.
    [example] = docs_examples("from openreward import")
    run_docs_example(openreward_python, example, stack.url)

    assert report["math_splits"] == ["gsm8k_test", "math500_test"]
    assert report["math_broken"]["prompt"] == report["math_right"]["prompt"]
    assert report["gsm8k_tasks"] == 1319
    # The task handed out carries no gold answer.
    assert report["task_spec"] == {"split": "gsm8k_test", "index": 0, "id": "gsm8k/0"}
    right = report["math_right"]
    assert "Janet" in right["prompt"] and right["tools"] == ["python", "submit"]
    # The interpreter kept `eggs` from one call to the next; neither call is graded.
    assert right["calls"][:2] == [
        {"text": "", "reward": None, "finished": False},
        {"text": "18\n", "reward": None, "finished": False},
    ]
    assert right["calls"][2]["reward"] == 1.0 and right["calls"][2]["finished"]
    assert right["calls"][3] == {"refused": "episode_finished"}
    assert report["math_wrong"]["calls"][0]["reward"] == 0.0
    # An answer the verifier cannot decide in time ends the episode with the failed reward
    # (0.0) and the error in the output's metadata: never the stream's error, which the SDK
    # raises (ToolFailed) and which would end the rollout.
    [tower] = report["math_tower"]["calls"]
    assert tower["reward"] == 0.0 and tower["finished"]
    assert tower["error"]["code"] == "timeout" and "Not graded (timeout" in tower["text"]
    assert report["math_bad"]["calls"] == [
        {"refused": "not_found"},
        {"refused": "input_validation"},
        {"refused": "input_validation"},
    ]
    assert report["code_right"]["calls"][0]["reward"] == 1.0
    assert report["code_wrong"]["calls"][0]["reward"] == 0.0
    assert report["bare_splits"] == ["humaneval", "mbpp_sanitized"]
    # A verifier that cannot be reached is the stream's error, named: never a reward of 0.
    [failed] = report["math_broken"]["calls"]
    assert "backend_unavailable" in failed["failed"] and "retryable" in failed["failed"]


def test_the_refiner_pays_the_gateways_spec_over_ors(
    service: Callable[..., RunningService], openreward_python: Path, tmp_path: Path
) -> None:
    """The refiner's answer is scored by the gateway's ``refiner_instance_rubrics`` spec: a fake
    judge model (no GPU here) grades every rubric at its top level, the citation scorer's
    lexical mode checks the cited snippet."""
    need_data(ROOT.parent / "shared" / "data" / "research")
    judge_model = FakeOpenAIServer(FakeScript(default_level=2))
    judge_model.start()
    try:
        llm = {"TRIBUNAL_JUDGE_BASE_URL": judge_model.base_url, "TRIBUNAL_JUDGE_MODEL": "fake"}
        judge = service("judge", env={**MEMORY, **llm})
        citation = service("citation", env=MEMORY)
        gateway = service(
            "gateway",
            env={
                **MEMORY,
                "TRIBUNAL_GATEWAY_JUDGE_URL": judge.base_url,
                "TRIBUNAL_GATEWAY_CITATION_URL": citation.base_url,
            },
        )
        port = free_port()
        server = start_process(
            [sys.executable, "-m", "tribunal.envs", "--port", str(port)],
            {"TRIBUNAL_ENVS_GATEWAY_URL": gateway.base_url},
            tmp_path / "envs.log",
        )
        try:
            url = f"http://127.0.0.1:{port}"
            wait_ready(url, 30, {"envs": server}, path="/health")
            log = tmp_path / "envs.log"
            done = run_driver(openreward_python, "ors_driver.py", "refiner", url, log=log)
            report = json.loads(done.stdout.strip().splitlines()[-1])
        finally:
            stop_tree(server)
    finally:
        judge_model.stop()
    assert "Search results:" in report["prompt"] and "30193240" in report["prompt"]
    [step] = report["calls"]
    # The spec's reward: 10 x the judge (every rubric at its top level: 1) + 0.2 x citation.
    assert step["finished"] and 10.0 < step["reward"] <= 10.2
