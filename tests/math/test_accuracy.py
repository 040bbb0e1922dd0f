"""Accuracy on real data: GSM8K and MATH-500 gold solutions against their own answers.

Data: ``$TRIBUNAL_DATA_DIR/math/`` (default ``../shared/data`` beside the repository; see
its SOURCES.md): GSM8K test (openai/grade-school-math @3101c7d, 1319 rows) and MATH-500
(openai/prm800k test split, 500 rows). Nothing is copied into the repository. Without the
data the module is skipped with one line, except under ``CI=true``, where it fails. Items
are scored in a 2-process pool, as the service does; the whole module takes a few seconds.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import DATA as SHARED_DATA
from tribunal.math import MathScore, verify_answer

pytestmark = pytest.mark.slow


DATA = SHARED_DATA / "math"
GSM8K = DATA / "gsm8k_test.jsonl"
MATH500 = DATA / "math500_test.jsonl"

if not (GSM8K.exists() and MATH500.exists()):
    _MISSING = f"no GSM8K / MATH-500 data under {DATA} (set TRIBUNAL_DATA_DIR)"
    if os.environ.get("CI") == "true":
        raise FileNotFoundError(_MISSING)  # CI must run the accuracy tests, not skip them
    pytest.skip(_MISSING, allow_module_level=True)

# MATH-500 gold solutions whose last \boxed{} does not verify against the `answer` field,
# by unique_id, with the cause. Asserted exactly: a regression and an improvement both fail.
# Agreement today: 500/500, so the list is empty.
KNOWN_MATH500_MISSES: dict[str, str] = {}


def _rows(path: Path) -> list[dict[str, object]]:
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


def _gsm8k_answer(solution: str) -> str:
    return solution.rsplit("####", 1)[1].strip()


@pytest.fixture(scope="module")
def pool() -> Iterator[ProcessPoolExecutor]:
    # spawn: no fork of a process that may hold threads (pytest-timeout, logging).
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=2, mp_context=context) as executor:
        yield executor


def _score(
    pool: ProcessPoolExecutor, responses: list[str], ground_truths: list[str]
) -> list[MathScore]:
    return list(pool.map(verify_answer, responses, ground_truths, chunksize=32))


def test_every_gsm8k_gold_solution_verifies(pool: ProcessPoolExecutor) -> None:
    # The whole solution, "#### N" line included, against N. Plain Math-Verify
    # (verify(parse(N), parse(solution))) gets 1315/1319: on rows 226, 258, 876 and 1303 its
    # regexes pick a number from the prose (33.333, 4.00, 5, 28) instead of the #### line.
    rows = _rows(GSM8K)
    solutions = [str(row["answer"]) for row in rows]
    answers = [_gsm8k_answer(solution) for solution in solutions]
    scores = _score(pool, solutions, answers)
    assert len(scores) == 1319
    failures = [(i, s) for i, s in enumerate(scores) if (s.reward, s.method) != (1.0, "gsm8k_hash")]
    assert failures == []


def test_gsm8k_perturbed_answers_are_rejected(pool: ProcessPoolExecutor) -> None:
    answers = [_gsm8k_answer(str(row["answer"])) for row in _rows(GSM8K)]
    values = [int(answer.replace(",", "")) for answer in answers]
    responses = [f"#### {value + 1}" for value in values]
    responses += [f"The answer is {-value}." for value in values if value != 0]
    truths = answers + [a for a, v in zip(answers, values, strict=True) if v != 0]
    scores = _score(pool, responses, truths)
    assert [s.extracted_answer for s in scores if s.reward != 0.0] == []


def test_math500_gold_solutions_agree_with_their_answers(pool: ProcessPoolExecutor) -> None:
    rows = _rows(MATH500)
    scores = _score(pool, [str(r["solution"]) for r in rows], [str(r["answer"]) for r in rows])
    misses = {
        str(row["unique_id"]): f"{score.extracted_answer!r} vs {score.extracted_ground_truth!r}"
        for row, score in zip(rows, scores, strict=True)
        if score.reward != 1.0
    }
    assert set(misses) == set(KNOWN_MATH500_MISSES), misses
    assert 500 - len(misses) == 500
    assert {score.method for score in scores} == {"boxed"}


def test_math500_off_by_one_answers_are_rejected(pool: ProcessPoolExecutor) -> None:
    # The first integer of the answer plus one: 3 -> 4, \frac{1}{2} -> \frac{2}{2},
    # (3, \frac{\pi}{2}) -> (4, \frac{\pi}{2}). 489 of the 500 answers contain a digit.
    truths, responses = [], []
    for row in _rows(MATH500):
        answer = str(row["answer"])
        digits = re.search(r"\d+", answer)
        if digits is None:
            continue
        wrong = answer[: digits.start()] + str(int(digits.group()) + 1) + answer[digits.end() :]
        truths.append(answer)
        responses.append(f"The final answer is $\\boxed{{{wrong}}}$.")
    assert len(truths) == 489
    scores = _score(pool, responses, truths)
    assert [s.extracted_answer for s in scores if s.reward != 0.0] == []


def test_math500_wrong_sign_answers_are_rejected(pool: ProcessPoolExecutor) -> None:
    # "-" prepended (or removed); the seven answers equal to 0 are left out (-0 = 0).
    truths = [str(row["answer"]) for row in _rows(MATH500) if str(row["answer"]) != "0"]
    flipped = [t[1:] if t.startswith("-") else "-" + t for t in truths]
    assert len(truths) == 493
    scores = _score(pool, [f"\\boxed{{{f}}}" for f in flipped], truths)
    assert [s.extracted_answer for s in scores if s.reward != 0.0] == []


def test_math500_wrong_answers_in_every_form_are_rejected(pool: ProcessPoolExecutor) -> None:
    # The off-by-one answer written without a box, and hedged: the right answer beside the
    # wrong one, as two boxes or two math spans. A hedge is a list, which never equals one
    # value: each part is parsed on its own, so Math-Verify's unit stripping cannot keep
    # only the first part ("\boxed{5.4 \text{ cents}} or \boxed{6.4 \text{ cents}}").
    truths, responses = [], []
    for row in _rows(MATH500):
        answer = str(row["answer"])
        digits = re.search(r"\d+", answer)
        if digits is None:
            continue
        wrong = answer[: digits.start()] + str(int(digits.group()) + 1) + answer[digits.end() :]
        forms = [
            f"So we get ${wrong}$.",
            wrong,
            f"Therefore x = {wrong}.",
            f"The roots are ${answer}$ and ${wrong}$.",
            f"\\boxed{{{answer}}} or \\boxed{{{wrong}}}",
        ]
        truths += [answer] * len(forms)
        responses += forms
    assert len(responses) == 5 * 489
    scores = _score(pool, responses, truths)
    assert [s.extracted_answer for s in scores if s.reward != 0.0] == []


def test_plain_number_path_decides_as_the_full_comparison_does() -> None:
    """The in-process shortcut (``verify_plain_numbers``) never disagrees with
    ``verify_answer``: on GSM8K golds, their off-by-ones and MATH-500 golds it either
    abstains or gives the same score, and it decides every GSM8K item (what it is for)."""
    from tribunal.math.verify import verify_plain_numbers

    gsm8k = [str(row["answer"]) for row in _rows(GSM8K)]
    cases = [(solution, _gsm8k_answer(solution)) for solution in gsm8k]
    cases += [(solution, str(int(float(t.replace(",", ""))) + 1)) for solution, t in cases]
    cases += [(str(row["solution"]), str(row["answer"])) for row in _rows(MATH500)]
    decided = 0
    for response, ground_truth in cases:
        fast = verify_plain_numbers(response, ground_truth)
        if fast is not None:
            decided += 1
            assert fast == verify_answer(response, ground_truth), (response[-200:], ground_truth)
    assert decided >= 2 * len(gsm8k)
