"""OpenEnv's reset / step / state served from Tribunal's environments (``/openenv/{env}``),
driven by the released ``openenv-core`` client (0.3.0, in .venv-openenv built from its own
hashed lock by ``scripts/protocol_envs.sh``) over its WebSocket, and over HTTP with its own
response models, against the folder's stack (the math and code services, Redis and a worker
for the interpreter sessions, the environment server)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.envs.conftest import (
    KEY,
    EnvsStack,
    client_python,
    docs_examples,
    run_docs_example,
    run_driver,
)

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="session")
def openenv_python() -> Path:
    """The venv of the ``openenv-core`` client."""
    return client_python("openenv")


def test_the_openenv_client_runs_episodes_over_websocket_and_http(
    envs_stack: EnvsStack, openenv_python: Path
) -> None:
    stack = envs_stack
    args = (stack.url, KEY, stack.broken_url)
    done = run_driver(openenv_python, "openenv_driver.py", *args, log=stack.log)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    # The example of docs/integrations.md, as written, in the client's own venv.
    examples = docs_examples("GenericEnvClient")
    assert len(examples) == 2  # an episode, and its per-step (trajectory) reward
    for example in examples:
        run_docs_example(openenv_python, example, stack.url)

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
    # An answer over several lines: an observation (not done, no reward, the error named as
    # ORS's reply names it), then the episode goes on: a mistyped argument is still OpenEnv's
    # VALIDATION_ERROR, and the right answer is paid.
    multiline, mistyped, right = report["retry"]
    assert multiline["done"] is False and multiline["reward"] is None
    assert multiline["observation"]["metadata"]["error"] == {
        "code": "input_validation",
        "message": "answer: one line, the final answer",
        "retryable": False,
        "field": "answer",
    }
    assert "Refused (input_validation" in multiline["observation"]["text"]
    assert "VALIDATION_ERROR" in mistyped["error"] and "answer: a string" in mistyped["error"]
    assert right["reward"] == 1.0 and right["done"]
    assert report["retry_state"]["step_count"] == 2 and report["retry_state"]["done"]
    # Per-step rewards: the intermediate reward, then the verifier's, and the discounted
    # credit of every step, each as OpenEnv's own trajectory rubric computes it.
    trajectory = report["trajectory"]
    assert (
        [s["reward"] for s in trajectory] == [0.25, 0.25, 1.0] == [s["rubric"] for s in trajectory]
    )
    assert trajectory[-1]["observation"]["metadata"]["step_rewards"] == [0.25, 0.5, 1.0]
    assert report["rubric_step_rewards"] == [0.25, 0.5, 1.0]
    assert report["trajectory_state"]["step_rewards"] == [0.25, 0.5, 1.0]
    bad = report["bad_trajectory"]["error"]
    assert "VALIDATION_ERROR" in bad and "trajectory.gamma" in bad
    # An answer the verifier cannot decide in time: an observation with the failed reward
    # (0.0) and the error in its metadata, never the error message the client raises.
    tower = report["tower"]
    assert tower["reward"] == 0.0 and tower["done"]
    assert tower["observation"]["metadata"]["error"]["code"] == "timeout"
    # A verifier that cannot be reached: the protocol's error, named, never a reward of 0.
    broken = report["broken"]["error"]
    assert "EXECUTION_ERROR" in broken and "backend_unavailable" in broken
    assert report["http_reset"]["observation"]["task"]["split"] == "humaneval"
    assert report["http_step"]["reward"] == 1.0 and report["http_step"]["done"]
    assert report["http_no_key"] == 401
    # The same over HTTP, for the math answer and for a program longer than the code service
    # takes: 200 and an observation, never 422.
    for (status, step), field in zip(report["http_refused"], ("answer", "code"), strict=True):
        assert status == 200, step
        assert step["done"] is False and step["reward"] is None
        error = step["observation"]["metadata"]["error"]
        assert error["code"] == "input_validation" and error["field"] == field
