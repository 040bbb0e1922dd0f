"""compare.py: stdout normalisation and type-strict value comparison (pure functions)."""

from __future__ import annotations

import math

from tribunal.code.codec import encode_value
from tribunal.code.compare import (
    normalise_stdout,
    return_value_matches,
    stdout_matches,
    values_equal,
)


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


def test_the_walk_decodes_only_what_can_match() -> None:
    collide = [k * (2**61 - 1) for k in range(1000)]  # one hash for all: quadratic as a set
    assert return_value_matches([1], {"v": {"$set": collide}, "o": []}) == (False, None)
    objects = [{"c": f"C{k}", "a": [["x", k]]} for k in range(1000)]  # a class per object
    assert return_value_matches([1], {"v": [{"$ref": 0}], "o": objects}) == (False, None)
    deep: object = 1
    for _ in range(100_000):  # no stack is used, whatever the depth
        deep = [deep]
    assert return_value_matches([[[1]]], {"v": deep, "o": []}) == (False, None)
    assert return_value_matches(1.5, {"v": 10**400, "o": []}) == (False, None)
    assert return_value_matches(1e308, {"v": 10**308, "o": []}) == (True, None)
    # dicts: distinct string keys, as many as expected; the order does not matter
    pairs = [["b", 2], ["a", 1]]
    assert return_value_matches({"a": 1, "b": 2}, {"v": {"$dict": pairs}, "o": []})[0]
    dup = [["a", 1], ["a", 1]]
    assert not return_value_matches({"a": 1, "b": 1}, {"v": {"$dict": dup}, "o": []})[0]
    assert not return_value_matches({"1": 1}, {"v": {"$dict": [[1, 1]]}, "o": []})[0]
    assert not return_value_matches([1], {"v": {"$set": [1]}, "o": []})[0]
    assert return_value_matches([1, [2]], {"v": {"$tuple": [1, {"$tuple": [2]}]}, "o": []})[0]
    assert return_value_matches(math.inf, encode_value(math.inf)) == (True, None)


def test_walk_and_decode_agree_on_honest_values() -> None:
    cases: list[tuple[object, object]] = [
        ([1, 2.0, "x", None, True], [1, 2.0, "x", None, True]),
        ([1.0], [1]),
        ({"k": [1, {"j": False}]}, {"k": (1, {"j": False})}),
        ([True], [1]),
        ([], ()),
        ({"a": 1}, {"a": 1, "b": 2}),
        ("é\U0001f600", "é\U0001f600"),
    ]
    for expected, value in cases:
        walked, _ = return_value_matches(expected, encode_value(value))
        assert walked is values_equal(expected, value), (expected, value)


def test_lists_of_scalars_are_compared_type_strictly() -> None:
    def wire(v: object) -> dict[str, object]:
        return {"v": v, "o": []}

    assert return_value_matches([1, "a", None, False], wire([1, "a", None, False]))[0]
    assert not return_value_matches([1, 2], wire([True, 2]))[0]
    assert not return_value_matches([True, 2], wire([1, 2]))[0]
    assert not return_value_matches([1, "a"], wire([1.0, "a"]))[0]
    assert not return_value_matches([None], wire([0]))[0]
    assert not return_value_matches([1, 2], wire([1, [2]]))[0]
    assert return_value_matches([1.0, 2], wire([1, 2]))[0]  # a float answer may be an int
    assert return_value_matches([[1, 2], [3]], wire({"$tuple": [[1, 2], {"$tuple": [3]}]}))[0]
    assert not return_value_matches([[1, 2], [3]], wire([[1, 2], [True]]))[0]


def test_a_list_of_scalars_is_compared_type_by_type() -> None:
    for expected, returned in (
        ([1, 2], [1, True]),  # True == 1, but a bool is not an int
        ([1, True], [True, 1]),  # the same types, not at the same places
        ([0, 1], [0.0, 1]),
        (["a", None], ["a", 0]),
    ):
        assert return_value_matches(expected, encode_value(returned)) == (False, None)
    assert return_value_matches([1, True, None], encode_value((1, True, None))) == (True, None)
