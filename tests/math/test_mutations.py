"""The math reward's generated red-team (issue 36), asserted: no meaning-changing mutation of
a real honest answer is paid, and every meaning-preserving one is (the operators are
``bench/math_mutations.py``)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from bench.math_mutations import (
    CHANGING,
    CONFIG,
    HONEST,
    PER_OPERATOR,
    PRESERVING,
    SEED,
    Operator,
)
from tribunal.math import verify_answer


def _cases(operators: dict[str, Operator]) -> list[Any]:
    params = []
    for name, operator in operators.items():
        rng = random.Random(f"{SEED}-{name}")
        mutated = []
        for box, gold in rng.sample(HONEST, len(HONEST)):
            response = operator(box, rng)
            if response is not None:
                mutated.append((response, gold))
            if len(mutated) == PER_OPERATOR:
                break
        params.append(pytest.param(mutated, id=name))
    return params


def test_there_are_hundreds_of_cases() -> None:
    assert len(HONEST) > 150
    total = sum(len(p.values[0]) for p in _cases(CHANGING) + _cases(PRESERVING))
    assert total >= 250


@pytest.mark.parametrize("mutated", _cases(CHANGING))
def test_no_meaning_changing_mutation_is_paid(mutated: list[tuple[str, str]]) -> None:
    paid = [r[-300:] for r, gold in mutated if verify_answer(r, gold, CONFIG).reward != 0.0]
    assert paid == []


@pytest.mark.parametrize("mutated", _cases(PRESERVING))
def test_every_meaning_preserving_mutation_is_paid(mutated: list[tuple[str, str]]) -> None:
    refused = [r[-300:] for r, gold in mutated if verify_answer(r, gold, CONFIG).reward != 1.0]
    assert refused == []
