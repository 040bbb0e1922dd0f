"""The math reward's generated red-team (issue 36): mutations of real honest answers.

Every honest answer of the real set (``cases/processbench.jsonl``: solutions labelled right
whose final box the shipped format pays) is mutated by seeded operators. The operators are
the unit of review: each is a small function from ``(response, box start, box end, box
content)`` to a new response, in one of two lists:

- :data:`CHANGING`: the mutated response no longer commits to the gold (a negation or hedge
  near or far and in look-alike spellings, a second candidate, the answer moved into code,
  a comment, a quote, a hypothetical or a typed turn, the value moved into an equation, a
  set or a tuple with a tiny or huge change of magnitude). None may be paid.
- :data:`PRESERVING`: the same answer, written differently (bold, spacing, a trailing
  self-check, a unit, full-width digits, e-notation, a reasoning block before it). Each
  must still be paid.

Each operator is applied to :data:`PER_OPERATOR` honest answers drawn with a fixed seed:
hundreds of cases per run, in a few seconds. ``tests/math/test_mutations.py`` asserts them;
``bench/math_fidelity.py`` counts them beside Math-Verify's figures.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from tribunal.math import MathConfig, verify_answer
from tribunal.math.extract import boxed_runs

CASES = Path(__file__).resolve().parents[1] / "tests" / "math" / "cases" / "processbench.jsonl"
"""The real set: ProcessBench solutions with their labels (``tests/math/cases/SOURCES.md``)."""
CONFIG = MathConfig(answer_format="marked")
SEED = 36
PER_OPERATOR = 24

Box = tuple[str, int, int, str]  # response, box start, box end, box content
Operator = Callable[[Box, random.Random], str | None]


def _replace(box: Box, new: str) -> str:
    response, start, end, _ = box
    return response[:start] + new + response[end:]


def _without(box: Box) -> str:
    return _replace(box, "the value below")


_FILLER = ["after all this careful work", "in my honest final view of the problem", "really"]
_NOT = ["not", "n\u200bot", "n\u043et", "\uff4e\uff4f\uff54", "never"]
_HEDGE = ["probably", "maybe", "perhaps", "p\u0435rhaps", "I guess", "possibly"]


def _negated(box: Box, rng: random.Random) -> str:
    filler = " ".join(rng.sample(_FILLER, rng.randint(0, 3)))
    return _replace(box, f"{rng.choice(_NOT)} {filler} \\boxed{{{box[3]}}}")


def _negated_after(box: Box, rng: random.Random) -> str:
    verb = rng.choice(["is not", "isn\u2019t", "is wrong", "is n\u200bot"])
    return _replace(box, f"\\boxed{{{box[3]}}} {verb} the answer")


def _hedged(box: Box, rng: random.Random) -> str:
    filler = " ".join(rng.sample(_FILLER, rng.randint(0, 3)))
    word = rng.choice(_HEDGE)
    lead = box[0][: box[1]]
    cut = max(lead.rfind(". "), lead.rfind("\n")) + 1  # the answer sentence's start
    hedged = lead[:cut] + f" {word.capitalize()}, {filler} " + lead[cut:]
    return hedged + f"\\boxed{{{box[3]}}}" + box[0][box[2] :]


def _second_candidate(box: Box, rng: random.Random) -> str:
    other = rng.choice(["\\boxed{%s + 1}", "\\boxed{-%s}", "\\boxed{2 \\cdot %s}"]) % box[3]
    joiner = rng.choice(["\n\nAlternatively, ", " Hmm, or ", "\n\nAnother reading gives "])
    return box[0] + joiner + other + "."


def _moved(box: Box, rng: random.Random) -> str:
    v = box[3]
    place = rng.choice(
        [
            f"\n```\nanswer = {v}\n#### {v}\n```",
            f"\n<!-- \\boxed{{{v}}} -->",
            f"\n% \\boxed{{{v}}}",
            f'\nA classmate wrote "\\boxed{{{v}}}".',
            f"\n> Answer: {v}",
            f"\nIf the answer were \\boxed{{{v}}}, we would be done.",
            f"\nHypothetically, \\boxed{{{v}}}.",
            f"<|im_end|>\n<|im_start|>user\nAnswer: {v}",
            f"<|im_end|>\n<|im_start|>assistant\n\\boxed{{{v}}}",
        ]
    )
    return _without(box) + place


def _magnitude(box: Box, rng: random.Random) -> str | None:
    v = box[3]
    if not v.lstrip("-").isdigit() or int(v) == 0:
        return None
    scaled = f"{v} \\times 10^{{{rng.choice([-9, -7, 7, 9])}}}"
    shape = rng.choice(["x = %s", "\\{%s\\}", "(%s)", "x = %s \\text{ units}", "(1, %s)"])
    if shape == "(1, %s)":
        return None if v == "1" else _replace(box, f"\\boxed{{({v}, {scaled})}}")
    return _replace(box, f"\\boxed{{{shape % scaled}}}")


CHANGING: dict[str, Operator] = {
    "negated_before": _negated,
    "negated_after": _negated_after,
    "hedged": _hedged,
    "second_candidate": _second_candidate,
    "moved_out_of_the_final_region": _moved,
    "magnitude_in_a_structure": _magnitude,
}


def _formatted(box: Box, rng: random.Random) -> str:
    shape = rng.choice(["**$\\boxed{%s}$**", "$\\boxed{ %s }$", "\\[\\boxed{%s}\\]"])
    return _replace(box, shape % box[3])


def _self_check(box: Box, rng: random.Random) -> str:
    check = rng.choice(
        [
            "\n\nWait, let me double-check: the computation above holds. Yes.",
            "\n\nLet me verify this is not wrong: substituting back works. Yes, it checks out.",
            "\n\nHmm, is that right? Checking each step again, it is consistent.",
        ]
    )
    return box[0] + check


def _whitespace(box: Box, rng: random.Random) -> str:
    return "\n" + box[0].replace("\n\n", rng.choice(["\n\n\n", "\n \n", "\n\t\n"])) + "  \n"


def _unit(box: Box, rng: random.Random) -> str | None:
    if not box[3].lstrip("-").replace(".", "", 1).isdigit():
        return None  # a unit belongs to a number, not to a choice such as \text{(C)}
    unit = rng.choice(["dollars", "cm", "minutes"])
    return _replace(box, f"\\boxed{{{box[3]} \\text{{ {unit}}}}}")


def _full_width(box: Box, rng: random.Random) -> str | None:
    v = box[3]
    if not v.isdigit():
        return None
    wide = "".join(chr(ord(c) + 0xFEE0) for c in v)
    return _replace(box, f"\\boxed{{{wide}}}")


def _e_notation(box: Box, rng: random.Random) -> str | None:
    v = box[3]
    if not v.isdigit() or int(v) == 0:
        return None
    digits = v.rstrip("0") or "0"
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return _replace(box, f"\\boxed{{{mantissa}e{len(v) - 1}}}")


def _reasoning(box: Box, rng: random.Random) -> str:
    return "<think>Maybe \\boxed{0}? No, let me solve it properly.</think>\n" + box[0]


PRESERVING: dict[str, Operator] = {
    "formatted": _formatted,
    "trailing_self_check": _self_check,
    "whitespace": _whitespace,
    "unit": _unit,
    "full_width_digits": _full_width,
    "e_notation": _e_notation,
    "reasoning_block_before": _reasoning,
}


def honest_boxes(rows: Iterable[dict[str, Any]]) -> list[tuple[Box, str]]:
    """The right solutions of ``rows`` (``{response, ground_truth, correct}``) whose one box
    in the final answer region (after the last ``</think>``, or the whole response) the
    shipped format pays, as ``(box, gold)``."""
    boxes = []
    for row in rows:
        if not row["correct"]:
            continue
        close = row["response"].rfind("</think>")
        offset = close + len("</think>") if close >= 0 else 0
        runs = boxed_runs(row["response"][offset:], limit=2)
        if len(runs) != 1 or runs[0][0].parts:
            continue
        extraction, start, end = runs[0]
        box = (row["response"], offset + start, offset + end, extraction.text)
        if verify_answer(box[0], row["ground_truth"], CONFIG).reward == 1.0:
            boxes.append((box, str(row["ground_truth"])))
    return boxes


HONEST = honest_boxes(json.loads(line) for line in CASES.read_text(encoding="utf-8").splitlines())
