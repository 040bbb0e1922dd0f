"""``tribunal calibrate judge``: the rubric judge's agreement with human rubric verdicts.

The judge is the stand-in OpenAI-compatible server (``tribunal.llm.testing.FakeOpenAIServer``,
``openai_compat_server`` in ``tests/conftest.py``) in place of vLLM, which needs a GPU and
weights this machine does not have: it answers 2, 1 or 0 by each rubric's ``MET-`` /
``HALF-`` / ``NOT-`` prefix, so every figure is known by hand.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tribunal.cli import app
from tribunal.judge.calibrate import agreement, read_labels
from tribunal.llm.testing import FakeOpenAIServer
from tribunal.wire.errors import BadInput

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = Path(__file__).parent / "cases" / "rubric_verdicts_sample.jsonl"
RULES = [("MET-", 2), ("HALF-", 1), ("NOT-", 0)]

# Per response, the judge's rewards (mean of level / 2 over all its rows, the tie included)
# and the human share of met rows (ties left out), from the sample by hand.
REWARDS = [(1 + 0.5 + 0) / 3, (1 + 0 + 1) / 3, (1 + 0) / 2, (0.5 + 1) / 2]
SHARES = [2 / 3, 1 / 2, 1 / 2, 1 / 2]


def judge_env(server: FakeOpenAIServer) -> dict[str, str]:
    return {
        "TRIBUNAL_JUDGE_BACKEND": "openai",
        "TRIBUNAL_JUDGE_BASE_URL": server.base_url,
        "TRIBUNAL_JUDGE_MODEL": "stand-in",
        "TRIBUNAL_JUDGE_LOGPROBS": "false",
    }


def assert_sample_figures(figures: dict[str, object]) -> None:
    # Non-tie rows (human, judge met): a TP, b FN (partial), c TN, d FP, e FN (2 of 3 met),
    # g TP, h TN, i TN (partial), j TP; f is a 1-1 tie.
    assert (figures["responses"], figures["rubrics"], figures["ties"]) == (4, 9, 1)
    assert figures["precision"] == pytest.approx(3 / 4, abs=1e-3)
    assert figures["recall"] == pytest.approx(3 / 5, abs=1e-3)
    # p_o = 6/9; p_e = (5/9)(4/9) + (4/9)(5/9) = 40/81; kappa = 14/41.
    assert figures["kappa"] == pytest.approx(14 / 41, abs=1e-3)
    assert figures["confusion"] == {
        "met": {"met": 3, "partially_met": 1, "not_met": 1},
        "not_met": {"met": 1, "partially_met": 1, "not_met": 2},
    }
    r = statistics.correlation(REWARDS, SHARES)
    assert figures["response_correlation"] == pytest.approx(r, abs=1e-3)
    gap = statistics.fmean(abs(a - b) for a, b in zip(REWARDS, SHARES, strict=True))
    assert figures["response_mean_gap"] == pytest.approx(gap, abs=1e-3)


def test_the_command_computes_the_figures_from_the_judges_verdicts(
    openai_compat_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    openai_compat_server.script.rules = RULES
    for name, value in judge_env(openai_compat_server).items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(app, ["calibrate", "judge", str(SAMPLE), "--json"])
    assert result.exit_code == 0, result.output
    assert_sample_figures(json.loads(result.output.strip().splitlines()[-1]))
    # One call per rubric row (rubrics_per_call 1), each response's rows one item.
    assert len(openai_compat_server.stats.requests) == 10


@pytest.mark.e2e  # a process of the CLI
def test_the_docs_example_runs(openai_compat_server: FakeOpenAIServer) -> None:
    # docs/judge.md's example, its server and model replaced by the stand-in's, in a process.
    page = (ROOT / "docs" / "judge.md").read_text()
    [block] = [b for b in re.findall(r"```sh\n(.*?)```", page, re.S) if "calibrate judge" in b]
    words = shlex.split(block.replace("\\\n", " "))
    env = {**os.environ, **judge_env(openai_compat_server)}
    command = [w for w in words if not re.fullmatch(r"TRIBUNAL_JUDGE_\w+=.*", w)]
    assert command[:3] == ["tribunal", "calibrate", "judge"]
    openai_compat_server.script.rules = RULES
    done = subprocess.run(
        [sys.executable, "-m", "tribunal.cli", *command[1:], "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert_sample_figures(json.loads(done.stdout.strip().splitlines()[-1]))


def test_limit_keeps_the_first_responses() -> None:
    responses = read_labels(SAMPLE, limit=2)
    assert [len(r.rubrics) for r in responses] == [3, 3]
    assert responses[0].question.startswith("user: I have had chest pain")
    assert [r.human for r in responses[1].rubrics] == [False, True, None]


def test_a_verdict_list_that_does_not_line_up_is_refused() -> None:
    responses = read_labels(SAMPLE, limit=1)
    with pytest.raises(ValueError, match="one verdict per rubric row"):
        agreement(responses, [["met"]], [1.0])


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ({"completion": "a", "rubric": "r", "binary_labels": [True]}, "prompt"),
        (
            {
                "prompt": [{"role": "user"}],
                "completion": "a",
                "rubric": "r",
                "binary_labels": [True],
            },
            "prompt",
        ),
        ({"prompt": "q", "completion": "", "rubric": "r", "binary_labels": [True]}, "completion"),
        ({"prompt": "q", "completion": "a", "rubric": "r", "binary_labels": []}, "binary_labels"),
        ({"prompt": "q", "completion": "a", "rubric": "r", "binary_labels": [1]}, "binary_labels"),
        (
            {"prompt": "q", "completion": "a", "rubric": "r", "binary_labels": [True], "points": 5},
            "points",
        ),
        (
            {
                "prompt": "q",
                "completion": "a",
                "rubric": "r",
                "binary_labels": [True],
                "prompt_id": 3,
            },
            "prompt_id",
        ),
    ],
)
def test_a_bad_row_is_refused_naming_its_line_and_field(
    tmp_path: Path, row: dict[str, object], field: str
) -> None:
    path = tmp_path / "labels.jsonl"
    good = {"prompt": "q", "completion": "a", "rubric": "r", "binary_labels": [True]}
    path.write_text(json.dumps(good) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(BadInput) as raised:
        read_labels(path)
    assert raised.value.field == field and ":2:" in raised.value.message
