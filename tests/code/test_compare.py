"""compare.py: stdout normalisation and type-strict value comparison (pure functions)."""

from __future__ import annotations

import enum
import math
import random
from typing import Any

import pytest

from tribunal.code.codec import encode_value
from tribunal.code.compare import (
    longest_match,
    normalise_stdout,
    reply_matches,
    return_value_matches,
    stdout_matches,
    values_equal,
)
from tribunal.code.protocol import dumps
from tribunal.wire import jsonparse


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


# -- return values as bytes (reply_matches) ---------------------------------------------------


def reply(value: object) -> bytes:
    """A return value's bytes as the driver sends them."""
    return dumps(encode_value(value)).encode()


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The replies that were parsed (the others were decided by their bytes alone)."""
    seen: list[bytes] = []
    real = jsonparse.loads

    def loads(data: bytes) -> Any:
        seen.append(data)
        return real(data)

    monkeypatch.setattr(jsonparse, "loads", loads)
    return seen


BIG = list(range(10**6, 10**6 + 200_000))


def test_an_equal_reply_matches_by_its_bytes(parsed: list[bytes]) -> None:
    assert reply_matches(BIG, reply(BIG)) == (True, None)
    mixed = [[1, True], None, 'a\n"', 2.5, -0.0, 1e16, [[]], 2**64 - 1, False]
    assert reply_matches(mixed, reply(mixed)) == (True, None)
    assert reply_matches(mixed, reply(mixed), float_tolerance=1e-6) == (True, None)
    assert parsed == []


def test_a_canonical_reply_that_differs_is_a_mismatch_by_its_bytes(parsed: list[bytes]) -> None:
    assert reply_matches(BIG, reply([*BIG[:-1], BIG[-1] + 1])) == (False, None)
    assert reply_matches(BIG, reply([True, *BIG[1:]])) == (False, None)
    assert reply_matches(BIG, reply(BIG[:-1])) == (False, None)
    assert reply_matches([[1], None], reply([[1], 0])) == (False, None)
    assert reply_matches([True], reply([1])) == (False, None)
    assert reply_matches([1], reply([True])) == (False, None)
    assert reply_matches([1], reply([1e-05])) == (False, None)  # a float, in the same bytes
    assert reply_matches([1], reply([1.0])) == (False, None)  # a float, whatever its bytes
    assert reply_matches([[1]], reply([["1"]])) == (False, None)  # a string never equals it
    assert parsed == []


class Colour(enum.Enum):
    RED = 1


class Level(enum.IntEnum):
    LOW = 1


@pytest.mark.parametrize(
    ("expected", "returned", "tolerance", "matches"),
    [
        (BIG, tuple(BIG), None, True),  # a tuple is a list
        ([[1, 2], [3]], [(1, 2), [3]], None, True),
        ([1.0, 2.5], [1, 2.5], None, True),  # a float answer may be an int
        ([0.5], [0.5 + 1e-9], 1e-6, True),
        ([0.5], [0.5 + 1e-9], None, False),
        ([0.0], [-0.0], None, True),
        ([-0.0], [0.0], None, True),
        ([1e-05], [1e-05], None, True),  # orjson writes 0.00001, the driver 1e-05
        (["é\x7f"], ["é\x7f"], None, True),  # orjson writes UTF-8 and DEL, the driver escapes
        ({"a": 1, "b": [2]}, {"b": [2], "a": 1}, None, True),  # any order
        ({"a": 1}, {"a": 2}, None, False),
        ([10**20], [10**20], None, True),  # past 64 bits: orjson writes none
        (["\ud800"], ["\ud800"], None, True),  # a lone surrogate: orjson writes none
        ([math.nan], [math.nan], None, True),
        ([math.nan], [None], None, False),  # orjson would write NaN as null
        ((1, 2), [1, 2], None, False),  # the walk matches no tuple; orjson writes a list
        ([Colour.RED], [1], None, False),  # nor an Enum, which orjson writes as its value
        ([Level.LOW], [1], None, False),
        ([["x"]], [["y"]], None, False),
    ],
)
def test_replies_the_bytes_cannot_decide_are_parsed_and_walked(
    parsed: list[bytes], expected: Any, returned: Any, tolerance: float | None, matches: bool
) -> None:
    verdict = reply_matches(expected, reply(returned), tolerance)
    assert verdict == (matches, None)
    assert len(parsed) == 1
    assert verdict == return_value_matches(expected, encode_value(returned), tolerance)


def test_bytes_and_walk_agree_on_every_pair() -> None:
    atoms: list[Any] = [0, 1, -1, 2**63, 2**64, True, False, None, 0.0, -0.0, 1.0, 1e-05, 1e16]
    atoms += [math.nan, math.inf, "", "a", "é", "\ud800", "null", (1,), {"a": 1}, Colour.RED]
    values = [*atoms, [], [1, 2], [[1], [True, None]], [1, "a"], [[1.5]], ([], [1]), [[[]]]]
    for expected in values:
        for returned in values:
            for tolerance in (None, 1e-6):
                assert reply_matches(expected, reply(returned), tolerance) == return_value_matches(
                    expected, encode_value(returned), tolerance
                ), (expected, returned, tolerance)


def test_an_expected_value_larger_than_the_reply_is_not_encoded(parsed: list[bytes]) -> None:
    """More values than the reply has bytes: the bytes cannot be equal, the type check stops
    there (a cyclic value too), and the walk decides."""
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    assert reply_matches(cyclic, reply([[[]]])) == (False, None)
    assert reply_matches(BIG, reply([1])) == (False, None)
    assert len(parsed) == 2


def test_a_reply_longer_than_any_match_is_not_parsed(parsed: list[bytes]) -> None:
    # Issue 38: a reply the bytes cannot decide was parsed whole (about 1 s at the 16 MiB
    # cap) before the walk stopped at its first node. Longer than anything that could match
    # the expected value, it is now a mismatch unparsed.
    floats = reply([0.25] * 100_000)
    assert len(floats) > 64 << 10
    assert reply_matches([1.5], floats) == (False, None)
    assert reply_matches([1.5], floats, float_tolerance=0.5) == (False, None)
    assert reply_matches(list(range(3)), reply(tuple(range(100_000)))) == (False, None)
    assert reply_matches({"a": [1]}, reply({str(i): i for i in range(20_000)})) == (False, None)
    assert parsed == []
    # Where a match is as long, or the bound says nothing, it is parsed and walked.
    assert reply_matches([0.3] * 100_000, floats, float_tolerance=0.5) == (True, None)
    assert reply_matches([1.5], floats, float_tolerance=1.0) == (False, None)
    assert len(parsed) == 2


def _longest_equal(value: Any, tolerance: float | None, rng: random.Random) -> Any:
    """A value equal to ``value`` under the walk's rules, written as long as the driver can:
    tuples for lists, the longest integer within the tolerance for a float."""
    if type(value) is list:
        return tuple(_longest_equal(v, tolerance, rng) for v in value)
    if type(value) is dict:
        return {k: _longest_equal(v, tolerance, rng) for k, v in value.items()}
    if type(value) is float and math.isfinite(value):
        if tolerance:  # math.isclose: |a - x| <= t * |a| at most, so |a| <= (|x| + t) / (1 - t)
            bound = (abs(value) + tolerance) / (1 - tolerance)
            widest = math.floor(bound if math.isfinite(bound) else abs(value))
            candidate = int(math.copysign(widest, value)) if value else 0
        else:
            candidate = int(value)
        if return_value_matches(value, encode_value(candidate), tolerance)[0]:
            return candidate
    return value


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    atoms: list[Any] = [
        0.0, -0.0, 1e-05, 1e15 + 0.5, 1e16, -1.7976931348623157e308, 5e-324, 0.1 + 0.2,
        math.nan, math.inf, -math.inf, 2**63 - 1, -(2**63), True, None, "", "a\x7f",
        "é" * 3, "\U0001f600", '"\\\n', "e+",
    ]  # fmt: skip
    kind = rng.randrange(4) if depth < 4 else 0
    if kind == 0:
        return rng.choice(atoms)
    if kind == 1:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if kind == 2:
        return {rng.choice(["", "k", "é", "\x00"]) + str(i): _random_value(rng, depth + 1)
                for i in range(rng.randrange(3))}  # fmt: skip
    return [rng.choice(atoms)] * rng.randrange(1, 30)


def test_the_longest_match_bounds_every_matching_reply() -> None:
    rng = random.Random(38)
    for _ in range(2_000):
        expected = _random_value(rng)
        for tolerance in (None, 1e-6, 0.5):
            returned = _longest_equal(expected, tolerance, rng)
            wire = encode_value(returned)
            assert return_value_matches(expected, wire, tolerance)[0], (expected, returned)
            longest = longest_match(expected, tolerance)
            assert longest is not None
            assert len(dumps(wire).encode()) <= longest, (expected, returned, tolerance)
