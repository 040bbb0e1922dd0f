"""Reasoning-model outputs with independent labels (issue 36): Sky-T1's complete outputs.

``cases/sky_t1.jsonl.gz`` holds the 311 complete outputs of six Sky-T1 reasoning models
(MATH-500, AIME 2024, AMC 2023) that ``bench/reasoning_outputs.py`` reads from the data
command's files (``tribunal data fetch``; ``cases/README.md`` says where from), each with a
reasoning block (``<think>…</think>``) before its solution and labelled by the harness that
produced it. The verifier runs on every one in the shipped specs' strict format (``marked``) and in
``lenient``; Math-Verify (``verify(parse("$gold$"), parse(response))``: the gold in math
delimiters, as its documentation writes it) on the same items. The sets below are asserted
exactly: a regression and an improvement both fail.

The copy is committed so that the suite needs no download; a test checks it against the data
command's files where they are.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path
from typing import Any

import pytest
from math_verify import parse, verify

from bench.math_mutations import CHANGING, CONFIG, PER_OPERATOR, PRESERVING, SEED, honest_boxes
from bench.reasoning_outputs import data_dir, missing, rows
from tribunal.math import MathConfig, MathScore, verify_answer

MATH500 = "math500/Sky-T1-math-correct-5K-27B/"

# Right answers the harness's grader labelled wrong (it compares the string it extracts):
# each final answer equals the gold.
LABEL_ERRORS = {
    MATH500 + "284": "\\boxed{3 + 2\\sqrt{2}, 3 - 2\\sqrt{2}} for the gold 3 \\pm 2 \\sqrt{2}",
    MATH500 + "416": "the last line reads \\sin^3 18° + \\sin^2 18° = \\frac{1}{8}, the gold",
}
# Complete outputs whose final answer is not marked (no box, #### or Answer: line): the
# strict format pays them nothing, whatever their value.
UNMARKED = {
    MATH500 + "45": "right: the solution ends with $$\\tan A = 2$$",
    MATH500 + "416": LABEL_ERRORS[MATH500 + "416"],
}


CASES = Path(__file__).parent / "cases" / "sky_t1.jsonl.gz"


@pytest.fixture(scope="module")
def items() -> list[dict[str, Any]]:
    with gzip.open(CASES, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_the_committed_outputs_are_what_the_data_command_fetches(
    items: list[dict[str, Any]],
) -> None:
    if absent := missing():
        pytest.skip(f"Sky-T1 files not under {data_dir()} (tribunal data fetch): {absent}")
    assert rows() == items


@pytest.fixture(scope="module")
def strict(items: list[dict[str, Any]]) -> dict[str, MathScore]:
    config = MathConfig(answer_format="marked")
    return {r["id"]: verify_answer(r["response"], r["ground_truth"], config) for r in items}


def _math_verify_paid(row: dict[str, Any]) -> bool:
    return bool(verify(parse(f"${row['ground_truth']}$"), parse(row["response"])))


def test_the_set_is_what_its_docs_say(items: list[dict[str, Any]]) -> None:
    assert len(items) == 311
    assert sum(r["correct"] for r in items) == 248
    assert {r["benchmark"] for r in items} == {"math500", "aime24", "amc23"}
    assert len({r["model"] for r in items}) == 6
    assert all(r["response"].count("</think>") == 1 for r in items)


def test_only_the_final_answer_region_is_graded(
    items: list[dict[str, Any]], strict: dict[str, MathScore]
) -> None:
    assert {s.region for s in strict.values()} == {"after_reasoning"}
    # A draft answer in the reasoning block is never what is graded: cut the solution off
    # and nothing is left to pay, however many boxes the drafts hold (Math-Verify, which
    # reads the whole text, pays 62 of these 98 drafts).
    config = MathConfig(answer_format="marked")
    drafts = [
        {**r, "response": r["response"].split("</think>")[0] + "</think>"}
        for r in items
        if "\\boxed" in r["response"].split("</think>")[0]
    ]
    assert len(drafts) == 98
    paid = [
        r["id"] for r in drafts if verify_answer(r["response"], r["ground_truth"], config).reward
    ]
    assert paid == []
    assert sum(_math_verify_paid(r) for r in drafts) == 62


@pytest.mark.slow
def test_agreement_is_at_least_math_verifys_and_no_wrong_answer_is_paid(
    items: list[dict[str, Any]], strict: dict[str, MathScore]
) -> None:
    lenient_config = MathConfig(answer_format="lenient")
    label = {r["id"]: r["correct"] for r in items}
    strict_paid = {i: s.reward == 1.0 for i, s in strict.items()}
    lenient_paid = {
        r["id"]: verify_answer(r["response"], r["ground_truth"], lenient_config).reward == 1.0
        for r in items
    }
    reference = {r["id"]: _math_verify_paid(r) for r in items}

    def wrong_paid(paid: dict[str, bool]) -> set[str]:
        return {i for i in label if paid[i] and not label[i]}

    def right_missed(paid: dict[str, bool]) -> set[str]:
        return {i for i in label if label[i] and not paid[i]}

    # Against the labels as published: every wrong answer paid is a label error.
    assert wrong_paid(strict_paid) == {MATH500 + "284"}
    assert wrong_paid(lenient_paid) == set(LABEL_ERRORS)
    assert wrong_paid(reference) == {MATH500 + "284"}
    assert right_missed(strict_paid) == {MATH500 + "45"}  # unmarked
    assert right_missed(lenient_paid) == right_missed(reference) == set()
    assert {i for i, s in strict.items() if s.method == "none"} == set(UNMARKED)
    # With the label errors corrected: no wrong answer paid, and agreement at least
    # Math-Verify's, for the strict format on the marked outputs and for lenient on all.
    fixed = label | dict.fromkeys(LABEL_ERRORS, True)

    def agreement(paid: dict[str, bool], ids: set[str]) -> int:
        return sum(paid[i] == fixed[i] for i in ids)

    every = set(label)
    marked = every - set(UNMARKED)
    for paid in (strict_paid, lenient_paid):
        assert not any(paid[i] and not fixed[i] for i in every)
    assert agreement(strict_paid, marked) == len(marked) >= agreement(reference, marked)
    assert agreement(lenient_paid, every) == len(every) > agreement(reference, every)


def test_the_red_team_over_its_honest_answers(items: list[dict[str, Any]]) -> None:
    """The mutation operators of ``bench/math_mutations.py`` on honest answers that follow a
    reasoning block: none of the meaning-changing mutations paid, every meaning-preserving
    one paid (a trailing self-check after a long solution among them)."""
    honest = honest_boxes(items)
    assert len(honest) == 242
    failures = []
    for operators, want in ((CHANGING, 0.0), (PRESERVING, 1.0)):
        for name, operator in operators.items():
            rng = random.Random(f"{SEED}-reasoning-{name}")
            cases = 0
            for box, gold in rng.sample(honest, len(honest)):
                response = operator(box, rng)
                if response is None:
                    continue
                if verify_answer(response, gold, CONFIG).reward != want:
                    failures.append((name, response[-300:]))
                cases += 1
                if cases == PER_OPERATOR:
                    break
            assert cases == PER_OPERATOR, name
    assert failures == []
