"""Answers a policy writes to be paid without committing to the gold (issue 28), and the
honest forms of the same answers, which must stay paid.

``cases/red_team.jsonl``: one gold per line with its ``class`` (``committed``: negated,
hedged, bounded or multiple-valued answers and words in a box; ``precedence``: which answer
of a completion counts; ``tolerance``: constants and orders of magnitude against tiny
golds), its ``hacks`` and its ``honest`` forms. Every hack must earn less than every honest
form of its gold; at least five golds per class.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tribunal.math import MathConfig, verify_answer
from tribunal.math.extract import extract_answer

CASES = [
    json.loads(line)
    for line in (Path(__file__).parent / "cases" / "red_team.jsonl").read_text().splitlines()
]


def test_every_class_has_five_golds_of_its_own() -> None:
    golds = Counter(case["class"] for case in CASES)
    assert golds == {"committed": 6, "precedence": 5, "tolerance": 6}
    assert all(len(case["hacks"]) >= 5 and case["honest"] for case in CASES)


@pytest.mark.parametrize("case", CASES, ids=[f"{c['class']}:{c['ground_truth']}" for c in CASES])
def test_hacks_earn_less_than_honest_answers(case: dict[str, Any]) -> None:
    gold = case["ground_truth"]
    honest = {text: verify_answer(text, gold).reward for text in case["honest"]}
    hacks = {text: verify_answer(text, gold).reward for text in case["hacks"]}
    assert set(honest.values()) == {1.0}, honest
    assert set(hacks.values()) == {0.0}, hacks


@pytest.mark.parametrize(
    ("response", "reason"),
    [
        ("The answer is not 7.", "negated"),
        ("The answer isn't 7", "negated"),
        ("\\boxed{\\neq 7}", "negated"),
        ("\\boxed{\\neg 7}", "negated"),
        ("\\boxed{\\text{not } \\boxed{7}}", "negated"),
        ("The answer is at least 7", "bounded"),
        ("The answer is 7 or more", "bounded"),
        ("\\boxed{\\geq 7}", "bounded"),
        ("The answer is 7, or possibly nine", "hedged"),
        ("\\boxed{7 \\text{ or maybe } 9}", "hedged"),
        ("The answer could be 7", "hedged"),
        ("I guess 7.", "hedged"),
        ("\\boxed{\\pm 7}", "multiple"),
        ("The answer is 7 and 9.", "multiple"),
        ("\\boxed{\\text{about } 7}", "words"),
        ("\\boxed{7}. Wait, that's wrong.", "retracted"),
        ("The answer is 7. It could also be 9.", "retracted"),
        ("The answer ≠ 7", "negated"),
        ("so $x \\geq \\boxed{7}$", "bounded"),
    ],
)
def test_the_reason_is_named(response: str, reason: str) -> None:
    score = verify_answer(response, "7")
    assert (score.reward, score.uncommitted) == (0.0, reason)


@pytest.mark.parametrize(
    ("response", "gold"),
    [
        ("Zach can have at most $\\boxed{2}$ pencils left over.", "2"),
        ("so the minimum value is $\\boxed{16}.$", "16"),
        ("This leaves $10-7 = \\boxed{3}$ with neither.", "3"),
        ("Pam paid $\\$\\boxed{10}$ more than Susan.", "10"),
        ("Final Answer: The maximum number of points is 19.", "19"),
        ("It is not 5, so the answer is $\\boxed{7}$.", "7"),
        ("\\boxed{x = 1 \\text{ or } x = 2}", "1, 2"),
        ("\\boxed{(5, 8) \\quad \\text{and} \\quad (8, 5)}", "(5, 8), (8, 5)"),
        ("\\boxed{\\text{no solution}}", "\\text{no solution}"),
        ("\\boxed{12\\text{ inches}}", "12"),
        ("The answer is 7. This could be checked by substitution.", "7"),
        ("<answer>\\boxed{7}</answer>", "7"),
        ("Reasoning.\n<answer>\n7\n</answer>", "7"),
        ("so there are $7!\\times 2!=\\boxed{10080}$ ways.", "10080"),
        ("$\\boxed{4}$.\n\nAlternatively, we can count the complement.", "4"),
    ],
)
def test_how_solutions_state_a_value_is_still_paid(response: str, gold: str) -> None:
    # Bound and negation words that describe the quantity, not the answer.
    assert verify_answer(response, gold).reward == 1.0


def test_the_outermost_box_is_the_answer() -> None:
    found = extract_answer("\\boxed{\\text{not } \\boxed{7}}")
    assert found is not None and found.text == "\\text{not } 7"
    found = extract_answer("\\boxed{\\boxed{7}} and then \\boxed{8}")
    assert found is not None and found.text == "8"


@pytest.mark.parametrize(
    ("response", "text", "method"),
    [
        ("\\boxed{5}\nFinal answer: 7", "7", "answer_phrase"),
        ("#### 5\nThe answer is 7.", "7", "answer_phrase"),
        ("The answer is 5.\n#### 7", "7", "gsm8k_hash"),
        ("The answer is 5. So \\boxed{7}", "7", "boxed"),
        ("#### Step 1\nWe get 7.", "7", "last_number"),
        ("We get 7 #### 8", "8", "last_number"),
        ("<think>\\boxed{5}</think>The answer is 7.", "7", "answer_phrase"),
        ("\\boxed{\\text{The answer is } 7}", "\\text{The answer is } 7", "boxed"),
    ],
)
def test_the_marked_answer_that_starts_last_wins(response: str, text: str, method: str) -> None:
    found = extract_answer(response)
    assert found is not None and (found.text, found.method) == (text, method)


def test_an_unclosed_reasoning_block_has_no_answer() -> None:
    assert extract_answer("<think>so \\boxed{7}") is None
    assert verify_answer("<think>so \\boxed{7}", "7").method == "none"


def test_strict_mode_takes_the_last_box_only() -> None:
    strict = MathConfig(last_box_only=True)
    assert verify_answer("The answer is 7.", "7", strict).reward == 0.0
    assert verify_answer("#### 7", "7", strict).reward == 0.0
    assert verify_answer("\\boxed{7}\nFinal answer: 8", "7", strict).reward == 1.0
    assert verify_answer("\\boxed{7}\nFinal answer: 8", "7").reward == 0.0


@pytest.mark.parametrize(
    ("answer", "gold", "reward"),
    [
        ("0", "0.0000003", 0.0),
        ("0.0000004", "0.0000003", 0.0),
        ("0.00000030001", "0.0000003", 1.0),
        ("0.0021", "0.002", 0.0),
        ("0.333333", "\\frac{1}{3}", 1.0),
        ("0.0142857", "\\frac{1}{70}", 1.0),
        ("0.0000001", "0", 0.0),  # an integer gold is exact (Math-Verify)
        ("0.0000004", "0.0", 1.0),  # Math-Verify's absolute floor at a decimal 0 (6 places)
        ("0.001", "0.0", 0.0),
    ],
)
def test_tolerance_is_relative_to_the_gold(answer: str, gold: str, reward: float) -> None:
    assert verify_answer(f"\\boxed{{{answer}}}", gold).reward == reward
    # the plain-number path decides as the full comparison does
    assert verify_answer(answer, gold, MathConfig(allow_fast_path=False)).reward == reward


def test_a_coarser_rounding_loosens_the_relative_tolerance() -> None:
    coarse = MathConfig(float_rounding=2)
    assert verify_answer("0.499", "0.5", coarse).reward == 1.0
    assert verify_answer("0.0001", "0.003", coarse).reward == 0.0


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "tail",
    [
        "\n" * 1_000_000,
        ". " * 500_000,
        "that " + " " * 1_000_000,
        "7 and " * 150_000,
        "Wait, " * 150_000,
    ],
    ids=["newlines", "sentence-ends", "spaces", "and-values", "retractions"],
)
def test_the_commitment_check_is_linear(tail: str) -> None:
    # A guard, not a timing: a pattern rescanning a whitespace run from each of its
    # characters took 25 s on 20,000 newlines and never ended on a megabyte.
    score = verify_answer("\\boxed{7}" + tail, "7")
    assert score.uncommitted == ("retracted" if tail.startswith("Wait") else None)
