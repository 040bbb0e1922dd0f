"""Real model solutions with independent labels (issue 36): ProcessBench's GSM8K and MATH rows.

``cases/processbench.jsonl`` (see ``cases/README.md``) holds 512 solutions written by 12
open models, each labelled by ProcessBench's annotators as having a right or wrong final
answer, with the gold answer of the GSM8K or MATH-500 problem it solves. The verifier is
run on every one in the shipped specs' strict format (``marked``) and in ``lenient``, and
Math-Verify (``verify(parse(gold), parse(response))``, its defaults) on the same items.
Both sets below are asserted exactly: a regression and an improvement both fail.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from math_verify import parse, verify

from tribunal.math import MathConfig, verify_answer

CASES = Path(__file__).parent / "cases" / "processbench.jsonl"

# Paid, labelled wrong: each answer equals the gold, ProcessBench's label disagrees.
LABEL_DISAGREEMENTS = {
    "gsm8k-70": "\\boxed{59}, the GSM8K answer 59",
    "gsm8k-74": "\\boxed{2} trips, the GSM8K answer 2",
    "math-392": "\\frac{1}{\\sin x \\cos x} - \\tan x is \\cot x, not simplified",
}
# Right answers the strict format does not pay, besides the 15 solutions with no mark at
# all (no box, #### or Answer: line: the format was not followed).
STRICT_MISSES = {
    "gsm8k-319": "\\boxed{4 blue shoe boxes and 6 red shoe boxes} for the gold 10",
    "gsm8k-329": "\\boxed{\\15}: a backslash typed for the dollar sign",
}


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in CASES.read_text(encoding="utf-8").splitlines()]


def _paid(rows: list[dict[str, Any]], config: MathConfig) -> dict[str, Any]:
    return {r["id"]: verify_answer(r["response"], r["ground_truth"], config) for r in rows}


def _math_verify_paid(row: dict[str, Any]) -> bool:
    return bool(verify(parse(row["ground_truth"]), parse(row["response"])))


def test_the_set_is_what_its_readme_says(rows: list[dict[str, Any]]) -> None:
    assert len(rows) == 512
    assert sum(r["correct"] for r in rows) == 257
    assert len({r["generator"] for r in rows}) == 12


@pytest.mark.slow
def test_agreement_is_at_least_math_verifys_and_no_wrong_answer_is_paid(
    rows: list[dict[str, Any]],
) -> None:
    strict = _paid(rows, MathConfig(answer_format="marked"))
    lenient = _paid(rows, MathConfig(answer_format="lenient"))
    reference = {r["id"]: _math_verify_paid(r) for r in rows}
    label = {r["id"]: r["correct"] for r in rows}

    def agreement(paid: dict[str, bool]) -> int:
        return sum(paid[i] == label[i] for i in label)

    strict_paid = {i: s.reward == 1.0 for i, s in strict.items()}
    lenient_paid = {i: s.reward == 1.0 for i, s in lenient.items()}
    for paid in (strict_paid, lenient_paid):
        assert {i for i in label if paid[i] and not label[i]} == set(LABEL_DISAGREEMENTS)
    assert agreement(lenient_paid) >= agreement(reference)
    # Every right answer the strict format misses has no mark, or is listed.
    unmarked = {i for i, s in strict.items() if label[i] and s.method == "none"}
    missed = {i for i in label if label[i] and not strict_paid[i]}
    assert missed - unmarked == set(STRICT_MISSES)
    assert len(unmarked) == 15
    # Marked solutions: the strict format agrees with the labels at least as often as
    # Math-Verify does on the same solutions.
    marked = [i for i in label if i not in unmarked]
    assert sum(strict_paid[i] == label[i] for i in marked) >= sum(
        reference[i] == label[i] for i in marked
    )
