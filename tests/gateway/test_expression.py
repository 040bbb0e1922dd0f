"""The formula language: arithmetic over component names, and nothing else."""

from __future__ import annotations

import math

import pytest

from tribunal.gateway.expression import FormulaError, parse_formula

NAMES = {"judge", "citation", "correct", "num_turns"}


@pytest.mark.parametrize(
    ("source", "values", "expected"),
    [
        ("10 * judge + 0.2 * citation", {"judge": 0.5, "citation": 1.0}, 5.2),
        ("-judge", {"judge": 0.25}, -0.25),
        ("+judge - 1", {"judge": 0.25}, -0.75),
        ("judge / 4", {"judge": 1.0}, 0.25),
        ("judge ** 2", {"judge": 3.0}, 9.0),
        ("(judge + 1) / (2 * 2)", {"judge": 3.0}, 1.0),
        ("2 ** -1 * judge", {"judge": 4.0}, 2.0),
        ("min(judge, citation, 0.3)", {"judge": 0.5, "citation": 1.0}, 0.3),
        ("max(judge, citation)", {"judge": 0.5, "citation": 1.0}, 1.0),
        ("clip(judge, 0, 1)", {"judge": 1.7}, 1.0),
        ("abs(judge)", {"judge": -2.0}, 2.0),
        (
            "correct + (1 - correct) * min(-0.6, (2 * correct - 1) + 0.05 * (num_turns - 2))",
            {"correct": 0.0, "num_turns": 6},
            -0.8,
        ),
    ],
)
def test_arithmetic(source: str, values: dict[str, float], expected: float) -> None:
    assert parse_formula(source, NAMES)(values) == pytest.approx(expected)


def test_names_read_are_reported() -> None:
    assert parse_formula("judge + 2 * judge", NAMES).names == {"judge"}


@pytest.mark.parametrize(
    ("source", "needle"),
    [
        ("judge.__class__", "Attribute"),
        ("judge.real", "Attribute"),
        ("().__class__.__bases__[0]", "Subscript"),
        ("citation[0]", "Subscript"),
        ("__import__('os').system('true')", "calling 'Attribute'"),
        ("__import__('os')", "calling '__import__'"),
        ("eval('1')", "calling 'eval'"),
        ("open('/etc/passwd')", "calling 'open'"),
        ("pow(judge, 2)", "calling 'pow'"),
        ("(lambda: 1)()", "calling 'Lambda'"),
        ("lambda: 1", "Lambda"),
        ("[x for x in (1, 2)]", "ListComp"),
        ("sum(x for x in (1, 2))", "calling 'sum'"),
        ("judge if citation else 0", "IfExp"),
        ("judge > 0", "Compare"),
        ("judge and citation", "BoolOp"),
        ("not judge", "Not"),
        ("~1", "Invert"),
        ("judge % 2", "Mod"),
        ("judge // 2", "FloorDiv"),
        ("judge << 2", "LShift"),
        ("9 ** 9 ** 9", "exponent"),
        ("judge ** 1000", "exponent"),
        ("judge ** citation", "exponent"),
        ("'text'", "constant 'text'"),
        ("True + judge", "constant True"),
        ("None", "constant None"),
        ("1e999", "non-finite"),
        ("(judge := 1)", "NamedExpr"),
        ("f'{judge}'", "JoinedStr"),
        ("min(*[1, 2])", "starred"),
        ("min(judge, key=abs)", "keyword"),
        ("(1, 2)", "Tuple"),
        ("{1: 2}", "Dict"),
        ("min(judge)", "at least 2"),
        ("clip(judge, 0)", "takes 3"),
        ("unknown + 1", "unknown name 'unknown'"),
        ("import os", "does not parse"),
        ("judge; citation", "does not parse"),
    ],
)
def test_refuses_everything_but_arithmetic(source: str, needle: str) -> None:
    with pytest.raises(FormulaError) as caught:
        parse_formula(source, NAMES)
    assert needle in str(caught.value)


def test_refuses_long_and_deep_formulas() -> None:
    with pytest.raises(FormulaError, match="longer than"):
        parse_formula("judge + " * 400 + "1", NAMES)
    with pytest.raises(FormulaError, match="deeper than"):
        parse_formula("-" * 40 + "judge", NAMES)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("judge / citation", "division by a component"),
        ("judge / (1 + citation)", "division by a component"),
        ("judge ** -1", "negative power of a component"),
        ("judge / (1 - 1)", "division by zero"),
    ],
)
def test_a_formula_that_can_divide_by_zero_is_refused_at_load(source: str, message: str) -> None:
    # Issue 36: a response that makes a component 0 would otherwise turn its item into an
    # error (HTTP 500 on /get_reward before).
    with pytest.raises(FormulaError, match=message):
        parse_formula(source, NAMES)


def test_undefined_values_are_errors_not_numbers() -> None:
    with pytest.raises(FormulaError, match="low 1 > high 0"):
        parse_formula("clip(judge, 1, 0)", NAMES)({"judge": 0.5})
    with pytest.raises(FormulaError, match="out of range"):
        parse_formula("judge ** 8", NAMES)({"judge": 1e300})
    # An overflow is an error even where a later min() would hide it.
    with pytest.raises(FormulaError, match="non-finite intermediate"):
        parse_formula("min(judge * judge, 1)", NAMES)({"judge": 1e300})
    with pytest.raises(FormulaError, match="non-finite intermediate"):
        parse_formula("max(judge - judge, 0)", NAMES)({"judge": math.inf})
