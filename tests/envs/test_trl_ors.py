"""TRL's OpenReward adapter (``trl.experimental.openreward`` of TRL 1.16.0, installed as
``trl[openreward]==1.16.0`` in .venv-trl from its own hashed lock by ``scripts/trainer_envs.sh``)
against Tribunal's ORS server and the folder's stack: the adapter's environments driven as
``GRPOTrainer``'s ``environment_factory`` drives them (tests/envs/trl_driver.py), and the example
of docs/integrations.md."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.envs.conftest import KEY, EnvsStack, docs_examples, run_docs_example, run_driver

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="session")
def trl_python() -> Path:
    """The venv of TRL with its ``openreward`` extra, built once from its lock."""
    script = ROOT / "scripts" / "trainer_envs.sh"
    subprocess.run([str(script), "venv", "trl"], check=True)
    return ROOT / ".venv-trl" / "bin" / "python"


def test_trls_openreward_adapter_runs_math_and_code_rollouts(
    envs_stack: EnvsStack, trl_python: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack = envs_stack
    monkeypatch.setenv("OPENREWARD_SESSION_URL", stack.url)
    done = run_driver(trl_python, "trl_driver.py", stack.url, KEY, stack.broken_url, log=stack.log)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    # The example of docs/integrations.md, as written, in TRL's venv.
    [example] = docs_examples("OpenRewardSpec")
    run_docs_example(trl_python, example, stack.url)

    math = report["math"]
    # The dataset's row, which the trainer hands to reset(): the task's public spec, no answer.
    assert math["row"] == {"task_index": 0, "split": "gsm8k_test", "index": 0, "id": "gsm8k/0"}
    # The tools the model is shown, as transformers reads the bound methods.
    assert sorted(math["tools"]) == ["python", "submit"]
    assert math["tools"]["submit"]["parameters"]["required"] == ["answer"]
    assert math["tools"]["submit"]["parameters"]["properties"]["answer"]["type"] == "string"
    right, wrong, bad = math["rollouts"]
    assert "Janet" in right["observation"]
    # The interpreter kept `eggs` between calls; tool calls are not graded, `submit` is, once.
    assert right["results"][1:] == ["18\n", right["results"][2]]
    assert right["rewards"] == [None, None, 1.0] and right["finished"]
    assert wrong["rewards"] == [0.0] and wrong["finished"]
    # A malformed answer is ORS's refusal with its reason, handed to the model as the tool's text;
    # an unknown tool or a missing argument never leaves the trainer. None is rewarded.
    assert bad["results"][0].startswith("Error:") and "input_validation" in bad["results"][0]
    assert bad["results"][1:] == [{"error": "Tool nope not found."}, bad["results"][2]]
    assert "missing 1 required positional argument: 'answer'" in bad["results"][2]["error"]
    assert bad["rewards"] == [None] and not bad["finished"]
    # The trainer's reward: the last non-null one; none for a rollout never scored (not a 0).
    assert math["reward_funcs"] == [1.0, 0.0, None]

    code = report["code"]
    assert (
        code["row"]["id"] == "HumanEval/2"
        and "truncate_number" in code["rollouts"][0]["observation"]
    )
    assert sorted(code["tools"]) == ["python", "submit"]
    assert code["reward_funcs"] == [1.0, 0.0]

    # A verifier that cannot be reached is the stream's error, named, and no reward: never a 0.
    [broken] = report["math_broken"]["rollouts"]
    [failed] = broken["results"]
    assert failed.startswith("Error:") and "backend_unavailable" in failed and "retryable" in failed
    assert broken["rewards"] == [None] and not broken["finished"]
    assert report["math_broken"]["reward_funcs"] == [None]
