"""Trusted comparison of program outputs with expected outputs (runs in the service).

Expected outputs never enter a sandbox: the driver hands out raw stdout bytes and tagged-JSON
return values, and the decision is made here, on plain data. Comparison is type-strict and
fails closed: ``True`` is not ``1``, a tuple is a list (JSON has no tuples) but a set, an
object or a malformed value never equals anything.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any


def normalise_stdout(text: str) -> list[str]:
    """Split into lines without trailing whitespace, dropping trailing empty lines.

    Examples:
        >>> normalise_stdout("1 2  \\n3\\n\\n")
        ['1 2', '3']
    """
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _float_close(expected: float, actual: float, tolerance: float | None) -> bool:
    if math.isnan(expected) or math.isnan(actual):
        return math.isnan(expected) and math.isnan(actual)
    if tolerance is None:
        return expected == actual
    return math.isclose(actual, expected, rel_tol=tolerance, abs_tol=tolerance)


def _token_equal(expected: str, actual: str, tolerance: float) -> bool:
    if expected == actual:
        return True
    try:
        e, a = float(expected), float(actual)
    except ValueError:
        return False
    return math.isfinite(e) and math.isfinite(a) and _float_close(e, a, tolerance)


def stdout_matches(expected: str, actual: bytes, float_tolerance: float | None = None) -> bool:
    """Compare a program's stdout with the expected text.

    Lines are compared after :func:`normalise_stdout`; with ``float_tolerance``, lines are
    compared token by token (whitespace-split) and tokens that both parse as finite floats
    match within the absolute/relative tolerance.

    Args:
        expected: The expected output.
        actual: The program's raw stdout (decoded as UTF-8; invalid bytes never match).
        float_tolerance: Absolute and relative tolerance, or None for exact text.
    """
    try:
        text = actual.decode("utf-8")
    except UnicodeDecodeError:
        return False
    want, got = normalise_stdout(expected), normalise_stdout(text)
    if float_tolerance is None:
        return want == got
    if len(want) != len(got):
        return False
    for line_want, line_got in zip(want, got, strict=True):
        tokens_want, tokens_got = line_want.split(), line_got.split()
        if len(tokens_want) != len(tokens_got):
            return False
        if not all(
            _token_equal(w, g, float_tolerance)
            for w, g in zip(tokens_want, tokens_got, strict=True)
        ):
            return False
    return True


def values_equal(expected: Any, actual: Any, float_tolerance: float | None = None) -> bool:
    """Type-strict equality of a JSON value with a decoded return value.

    ``bool`` only equals ``bool``; ``int`` only ``int``; a float expected accepts an int
    (LeetCode's double answers) but never a bool; lists accept lists and tuples; dicts need
    string keys. Floats compare exactly unless ``float_tolerance`` is given.
    """
    if expected is None:
        return actual is None
    kind = type(expected)
    if kind is bool:
        return type(actual) is bool and actual is expected
    if kind is int:
        return type(actual) is int and actual == expected
    if kind is float:
        if type(actual) is int:
            actual = float(actual)
        return type(actual) is float and _float_close(expected, actual, float_tolerance)
    if kind is str:
        return type(actual) is str and actual == expected
    if kind is list:
        if type(actual) not in (list, tuple) or len(actual) != len(expected):
            return False
        return all(
            values_equal(e, a, float_tolerance) for e, a in zip(expected, actual, strict=True)
        )
    if kind is dict:
        if type(actual) is not dict or len(actual) != len(expected):
            return False
        if not all(type(k) is str for k in actual):
            return False
        return all(
            k in actual and values_equal(v, actual[k], float_tolerance) for k, v in expected.items()
        )
    return False


_KNOWN_TAGS = frozenset(
    ("$tuple", "$set", "$frozenset", "$dict", "$bytes", "$float", "$complex", "$range", "$opaque")
) | {"$ref"}


def _wire_float(node: Any) -> float | None:
    """The float a wire node stands for (an int, a float, a ``$float`` tag), or None."""
    kind = type(node)
    if kind is float:
        return float(node)
    if kind is int:
        try:
            return float(node)
        except OverflowError:  # past the float range: equal to no float
            return None
    if kind is dict and len(node) == 1 and type(node.get("$float")) is str:
        return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}.get(node["$float"])
    return None


_SCALARS = frozenset((int, str, bool, type(None)))


def _distinct_keys_of(pairs: list[Any], want: dict[Any, Any]) -> bool:
    """Whether ``pairs`` are ``[key, value]`` lists whose keys are distinct strings of
    ``want`` (as many pairs as ``want`` has keys: checked by the caller)."""
    seen: set[str] = set()
    for pair in pairs:
        if type(pair) is not list or len(pair) != 2 or type(pair[0]) is not str:
            return False
        if pair[0] in seen or pair[0] not in want:
            return False
        seen.add(pair[0])
    return True


def _dict_pairs(want: dict[str, Any], pairs: list[list[Any]]) -> Iterator[tuple[Any, Any]]:
    for key, value in pairs:
        yield want[key], value


def _mismatch(node: Any) -> str | None:
    """Why a wire node that failed to match is malformed, if it is (for the message)."""
    if type(node) is dict and (len(node) != 1 or next(iter(node)) not in _KNOWN_TAGS):
        return "malformed return value"
    return None


def return_value_matches(  # noqa: C901 - one flat type dispatch reads best
    expected: Any, wire: Any, float_tolerance: float | None = None
) -> tuple[bool, str | None]:
    """Compare a wire value from the sandbox with ``expected``, walking both together.

    Nothing is decoded that could not match: each step pairs one node of ``expected`` (plain
    JSON) with the wire node at the same place, and the walk stops at the first mismatch. The
    work is at most linear in the size of ``expected``, whatever the program returned (a
    reply of colliding integer hashes, one class per object, a deep nest: none is built),
    and no stack is used. Same rules as :func:`values_equal`: a list accepts a list or a
    ``$tuple``; a dict only a ``$dict`` of as many distinct string keys; an int past the
    float range equals no float; objects, sets, bytes and opaque values equal nothing.

    Returns:
        ``(matches, message)``; ``message`` says why a malformed value did not match.
    """
    if type(wire) is not dict or set(wire) != {"v", "o"}:
        return False, "malformed return value"
    # A stack of iterators over (expected, wire) pairs: siblings are compared in order and
    # nothing is queued ahead, so a mismatch stops the walk where it is.
    stack: list[Iterator[tuple[Any, Any]]] = [iter(((expected, wire["v"]),))]
    while stack:
        pair = next(stack[-1], None)
        if pair is None:
            stack.pop()
            continue
        want, node = pair
        kind = type(want)
        if want is None:
            ok = node is None
        elif kind is bool:
            ok = node is want
        elif kind is int:
            ok = type(node) is int and node == want
        elif kind is float:
            got = _wire_float(node)
            ok = got is not None and _float_close(want, got, float_tolerance)
        elif kind is str:
            ok = type(node) is str and node == want
        elif kind is list:
            items = node
            if type(node) is dict and len(node) == 1 and "$tuple" in node:
                items = node["$tuple"]
            ok = type(items) is list and len(items) == len(want)
            kinds = set(map(type, want)) if ok else set()
            if ok and _SCALARS.issuperset(kinds):
                # A list of ints, strings, bools and nulls (LeetCode's usual answer): equal
                # iff equal (in C, stopping at the first difference) and of the same types:
                # for a list of one type, one set of the reply's types (half the work of two
                # lists of types and their comparison: 24 ms against 47 at the largest cap).
                ok = items == want and (
                    set(map(type, items)) == kinds
                    if len(kinds) == 1
                    else list(map(type, items)) == list(map(type, want))
                )
            elif ok:
                stack.append(zip(want, items, strict=True))
        elif kind is dict:
            pairs = node.get("$dict") if type(node) is dict and len(node) == 1 else None
            if type(pairs) is not list or len(pairs) != len(want):
                return False, _mismatch(node)
            ok = _distinct_keys_of(pairs, want)
            if ok:
                stack.append(_dict_pairs(want, pairs))
        else:
            ok = False
        if not ok:
            return False, _mismatch(node)
    return True, None
