"""NeMo Gym's resources-server protocol served from Tribunal (``/nemo_gym/{math,code}``),
driven by NeMo Gym 0.4.0's own models and HTTP client code in a Python 3.12 venv of its own
(.venv-nemo-gym, built from requirements/protocol-envs/nemo-gym.txt by
``scripts/protocol_envs.sh`` with ``PYTHON`` a 3.12 interpreter), against the folder's stack
(the math and code services and the environment server)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.envs.conftest import (
    KEY,
    EnvsStack,
    client_python,
    docs_examples,
    run_docs_example,
    run_driver,
)
from tribunal.envs import nemo_gym

pytestmark = pytest.mark.e2e


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
    """The venv of NeMo Gym 0.4.0, on Python 3.12."""
    return client_python("nemo-gym", python312())


def test_nemo_gyms_client_verifies_with_tribunal(
    envs_stack: EnvsStack, nemo_gym_python: Path
) -> None:
    stack = envs_stack
    args = (stack.url, KEY, stack.broken_url)
    done = run_driver(nemo_gym_python, "nemo_gym_driver.py", *args, log=stack.log)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    # The example of docs/integrations.md, as written, in the client's own venv.
    [example] = docs_examples("nemo_gym")
    run_docs_example(nemo_gym_python, example, stack.url)

    assert report["seed"] == 200
    # The message's output_text is graded; the reasoning item's \boxed{17} is not.
    assert report["math"] == [1.0, 0.0]
    assert report["code"] == 1.0
    # A sample that cannot be graded is NeMo Gym's 200 with the failed reward (0.0, the
    # verifiers' lowest) and the error under `tribunal`, never an error status (NeMo Gym's
    # agents raise on one, and rollout collection stops).
    failed = report["failed"]
    assert {case: (f["status"], f["reward"]) for case, f in failed.items()} == {
        "no_answer": (200, 0.0),
        "unparseable": (200, 0.0),
    }
    no_answer = failed["no_answer"]["tribunal"]["error"]
    assert no_answer["code"] == "bad_input" and no_answer["field"] == "expected_answer"
    unparseable = failed["unparseable"]["tribunal"]["error"]
    assert unparseable["code"] == "bad_input" and unparseable["field"] == "ground_truth"
    assert "no parseable math answer" in unparseable["message"]
    # /reverify_mode as newer NeMo Gym's `gym eval reverify` reads it: both verifiers are
    # declared stateless for `tribunal rescore`, so re-verifying is safe.
    assert report["reverify"] == {"math": "stateless", "code": "stateless"}
    page = (ROOT / "docs" / "integrations.md").read_text()
    [curl] = [b for b in re.findall(r"```sh\n(.*?)```", page, re.S) if "reverify_mode" in b]
    command, expected = curl.replace("http://127.0.0.1:8105", stack.url).splitlines()
    answer = subprocess.run(
        command.replace("<key>", KEY), shell=True, capture_output=True, text=True
    )
    assert answer.stdout == expected.removeprefix("# ")
    aggregate = report["aggregate"]
    assert aggregate["agent_metrics"]["mean/reward"] == pytest.approx(1 / 3)
    assert aggregate["agent_metrics"]["pass@k"] == 0.5
    assert aggregate["agent_metrics"]["failed"] == aggregate["key_metrics"]["failed"] == 1
    assert [g["mean/reward"] for g in aggregate["group_level_metrics"]] == [0.5, 0.0]
    # A verifier that cannot be reached: 502 naming the error class, never a reward of 0.
    status, detail = report["broken"]
    assert status == 502 and detail.startswith("backend_unavailable")


@pytest.mark.parametrize(
    ("declared", "mode"),
    [({"math": "stateless"}, "stateless"), ({"math": "stateful"}, "unsupported"), ({}, "unknown")],
)
def test_reverify_mode_follows_the_rescore_declaration(
    monkeypatch: pytest.MonkeyPatch, declared: dict[str, str], mode: str
) -> None:
    monkeypatch.setattr(nemo_gym, "REVERIFY", declared)
    assert nemo_gym.reverify_mode("math") == mode
