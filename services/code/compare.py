"""Trusted comparison of program outputs with expected outputs (runs in the service).

Expected outputs never enter a sandbox: the driver hands out raw stdout bytes and tagged-JSON
return values, and the decision is made here, on plain data. Comparison is type-strict and
fails closed: ``True`` is not ``1``, a tuple is a list (JSON has no tuples) but a set, an
object or a malformed value never equals anything.
"""

from __future__ import annotations

import math
from typing import Any

from tribunal.code.harness import CodecError, decode_value


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


def return_value_matches(
    expected: Any, wire: Any, float_tolerance: float | None = None
) -> tuple[bool, str | None]:
    """Decode a wire value from the sandbox and compare it with ``expected``.

    Returns:
        ``(matches, message)``; ``message`` says why a malformed value did not match.
    """
    try:
        actual = decode_value(wire)
    except CodecError as exc:
        return False, f"malformed return value: {exc}"
    try:
        return values_equal(expected, actual, float_tolerance), None
    except RecursionError:
        return False, "return value nested too deeply"
    except OverflowError:
        return False, "return value out of range"
