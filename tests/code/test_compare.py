"""compare.py: stdout normalisation and type-strict value comparison (pure functions)."""

from __future__ import annotations

import math

from tribunal.code.compare import (
    normalise_stdout,
    return_value_matches,
    stdout_matches,
    values_equal,
)
from tribunal.code.harness import encode_value


def test_stdout_ignores_trailing_whitespace_and_final_newlines() -> None:
    assert stdout_matches("1 2\n3", b"1 2   \n3\n\n\n")
    assert stdout_matches("a\r\nb\n", b"a\nb")
    assert normalise_stdout("x \n\n") == ["x"]


def test_stdout_keeps_inner_differences() -> None:
    assert not stdout_matches("1 2", b"1  2")
    assert not stdout_matches("1\n2", b"1\n\n2")
    assert not stdout_matches("3", b"")
    assert not stdout_matches("PASSED", b"\xff\xfe")


def test_stdout_float_tolerance_is_opt_in() -> None:
    assert not stdout_matches("0.333333", b"0.3333331")
    assert stdout_matches("0.333333", b"0.3333331", float_tolerance=1e-6)
    assert stdout_matches("x 1.0", b"x 1.0000001", float_tolerance=1e-6)
    assert not stdout_matches("x 1.0", b"y 1.0", float_tolerance=1e-6)
    assert not stdout_matches("nan", b"1.0", float_tolerance=1.0)


def test_values_are_compared_by_type() -> None:
    assert not values_equal(True, 1)
    assert not values_equal(1, True)
    assert not values_equal(0, False)
    assert not values_equal(1, 1.0)
    assert values_equal(1.0, 1)  # a float answer may be given as an int (LeetCode doubles)
    assert not values_equal(1.0, True)
    assert not values_equal("1", 1)
    assert not values_equal(None, 0)
    assert values_equal([1, [2, "a"]], (1, [2, "a"]))
    assert not values_equal([1, 2], {1, 2})
    assert values_equal({"a": [1]}, {"a": [1]})
    assert not values_equal({"1": 1}, {1: 1})
    assert values_equal(0.1 + 0.2, 0.3, float_tolerance=1e-9)
    assert not values_equal(0.1 + 0.2, 0.3)


def test_return_values_decode_then_compare() -> None:
    assert return_value_matches([0, 1], encode_value((0, 1))) == (True, None)
    assert return_value_matches(True, encode_value(1))[0] is False
    ok, message = return_value_matches(1, {"v": {"$bogus": 1}, "o": []})
    assert not ok and message and "malformed" in message
    assert return_value_matches(1.5, encode_value(math.nan))[0] is False
