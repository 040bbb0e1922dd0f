"""``tribunal rescore`` (issue 40): stored rollouts scored under two specs, and the diff.

The math service runs as a process (embedded queue); the command runs as a process of its
own, as a user types it, on an inspector-export record and plain rollouts.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import RunningService
from tribunal.gateway import load_spec_text
from tribunal.gateway.rescore import change_class
from tribunal.testing.stack import TRIBUNAL

LENIENT = """
name: rloo_math
version: "2-lenient"
components:
  math:
    verifier: math
    inputs:
      response: response
      ground_truth: ground_truth
      options: {value: {answer_format: lenient}}
"""


def _run(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*TRIBUNAL, "rescore", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_change_classes() -> None:
    assert [change_class(a, b) for a, b in ((1.0, 1.0), (0.0, 1.0), (1.0, 0.0))] == [
        "same",
        "up",
        "down",
    ]
    assert [change_class(a, b) for a, b in ((None, 1.0), (1.0, None), (None, None))] == [
        "error_a",
        "error_b",
        "both_error",
    ]


@pytest.mark.slow
def test_a_stateful_spec_is_refused_without_force(tmp_path: Path) -> None:
    stateful = tmp_path / "world.yaml"
    stateful.write_text(LENIENT.replace('version: "2-lenient"', 'version: "w"\nreverify: stateful'))
    rollouts = tmp_path / "r.jsonl"
    rollouts.write_text('{"id": "a", "response": "7", "ground_truth": "7"}\n')
    done = _run([str(rollouts), "--config", str(stateful), "--config", "rloo_math"])
    assert done.returncode == 2
    assert "spec rloo_math declares reverify: stateful" in done.stderr and "--force" in done.stderr
    # The declaration moves no reward: the hash is the rule's.
    assert (
        load_spec_text(stateful.read_text()).hash
        == load_spec_text(LENIENT.replace('version: "2-lenient"', 'version: "w"')).hash
    )
    one = _run([str(rollouts), "--config", "rloo_math"])
    assert one.returncode == 2 and "exactly two specs" in one.stderr
    rollouts.write_text('{"response": "7"}\n')
    bad = _run([str(rollouts), "--config", "rloo_math", "--config", "tcr_agent"])
    assert bad.returncode == 2 and "line 1: a rollout is an object with a string id" in bad.stderr


@pytest.mark.e2e
def test_rescore_diffs_two_spec_versions(
    service: Callable[..., RunningService], tmp_path: Path
) -> None:
    math = service("math", env={"TRIBUNAL_QUEUE": "memory", "TRIBUNAL_MATH_PROCESSES": "1"})
    lenient = tmp_path / "lenient.yaml"
    lenient.write_text(LENIENT)
    exported = {  # a record of the inspector's export: its item is the rollout
        "summary": {"id": "boxed"},
        "item": {"id": "boxed", "spec": "rloo_math", "response": "\\boxed{7}", "ground_truth": "7"},
        "result": {"id": "boxed", "reward": 1.0},
    }
    plain = [
        {"id": "bare", "response": "adding them we get 7", "ground_truth": "7"},
        {"id": "wrong", "response": "\\boxed{8}", "ground_truth": "7"},
        {"id": "no_truth", "response": "\\boxed{7}"},
    ]
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text("\n".join(json.dumps(r) for r in [exported, *plain]) + "\n")
    out = tmp_path / "diff.json"
    done = _run(
        [str(rollouts), "--config", str(lenient), "--config", "rloo_math", "--out", str(out)],
        env={"TRIBUNAL_GATEWAY_MATH_URL": math.base_url},
    )
    assert done.returncode == 0, done.stderr
    diff = json.loads(out.read_text())
    assert diff["a"]["version"] == "2-lenient" and diff["b"]["version"] == "3"
    assert diff["a"]["hash"] != diff["b"]["hash"]
    assert diff["items"] == 4
    assert diff["classes"] == {"both_error": 1, "down": 1, "same": 2}
    changed = {c["id"]: c for c in diff["changed"]}
    assert changed["bare"]["a"] == 1.0 and changed["bare"]["b"] == 0.0
    assert changed["no_truth"]["error_a"] == changed["no_truth"]["error_b"] == "bad_input"
