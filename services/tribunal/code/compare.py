"""Trusted comparison of program outputs with expected outputs (runs in the service).

Expected outputs never enter a sandbox: the driver hands out raw stdout bytes and tagged-JSON
return values, and the decision is made here, on plain data. Comparison is type-strict and
fails closed: ``True`` is not ``1``, a tuple is a list (JSON has no tuples) but a set, an
object or a malformed value never equals anything.

A return value arrives as the bytes of its JSON (:func:`reply_matches`): they are compared
with the expected value's own JSON before anything is parsed, and parsed and walked
(:func:`return_value_matches`) only where the bytes cannot decide.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from itertools import chain, groupby
from typing import Any

import orjson

from tribunal.wire import jsonparse


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


# --------------------------------------------------------------------------------------------
# Return values as bytes: compared before they are parsed
# --------------------------------------------------------------------------------------------

_HEAD = b'{"v":'
_TAIL = b',"o":[]}'
"""The driver's JSON of a wire value without objects is ``_HEAD + <JSON of v> + _TAIL``."""
_OBJECT = ord("{")

_JSON_KINDS = frozenset((list, int, str, bool, float, type(None)))
_CANONICAL_KINDS = frozenset((list, int, bool, type(None)))
"""A value made of these alone has exactly one compact JSON text (see :func:`reply_matches`)."""
_MAX_LEVELS = 100
"""Deepest expected value the bytes are compared for: the driver passes on no deeper return
value (``codec._MAX_WIRE_DEPTH``), and a cyclic expected value must not go round forever."""
_ORJSON_STRICT = (
    orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)
"""Subclasses, dataclasses and dates go to ``default`` (which refuses them) instead of being
written as JSON (a second line of defence: the types are checked first)."""


def _unwritable(value: Any) -> Any:
    raise TypeError(type(value).__name__)


def _kinds(level: list[Any]) -> set[type]:
    """The types of ``level``'s items. A list of one type (the usual answer) is found by one
    pass that would stop where a second type starts (24 ms for two million integers, against
    33 for a set of their types); only a list of several types is then made a set of them."""
    runs = groupby(map(type, level))
    first = next(runs, None)
    if first is None:
        return set()
    if next(runs, None) is None:
        return {first[0]}
    return set(map(type, level))


def expected_json(expected: Any, max_nodes: int) -> tuple[bytes, bool] | None:
    """The compact JSON of ``expected`` (written by orjson), where its bytes may stand for it.

    That is where ``expected`` is made of lists, ``str``, ``int`` (at most 64 bits), ``bool``,
    ``None`` and finite ``float`` alone, each of exactly that type (no dict: the driver writes
    a dict as a ``$dict`` of pairs; no tuple, ``Enum``, ``UUID``, subclass or NaN, which orjson
    would write as the JSON of something else), at most :data:`_MAX_LEVELS` deep, and of at
    most ``max_nodes`` values in all (a reply of ``max_nodes`` bytes holds no more). The types
    are checked a level at a time, each level in C (:func:`_kinds`), so the work is linear in
    ``expected`` and stops at ``max_nodes``. Types are told apart by ``==`` and their hash: a
    class whose metaclass makes it equal to ``int`` would pass for one (``expected`` is the
    trainer's data, never the program's).

    Returns:
        ``(text, canonical)``: ``canonical`` when ``expected`` holds no ``str`` and no
        ``float`` (its JSON text is then the only one of its value); None where the bytes may
        not stand for ``expected``.
    """
    level: list[Any] = [expected]
    nodes = 1
    seen: set[type] = set()
    for _ in range(_MAX_LEVELS):
        kinds = _kinds(level)
        if not kinds <= _JSON_KINDS:
            return None
        seen |= kinds
        if float in kinds:
            floats = level if len(kinds) == 1 else [x for x in level if type(x) is float]
            if not all(map(math.isfinite, floats)):
                return None
        if list not in kinds:
            break
        lists = level if len(kinds) == 1 else [x for x in level if type(x) is list]
        nodes += sum(map(len, lists))  # the next level, counted before it is built
        if nodes > max_nodes:
            return None
        level = lists[0] if len(lists) == 1 else list(chain.from_iterable(lists))
    else:
        return None
    try:
        text = orjson.dumps(expected, option=_ORJSON_STRICT, default=_unwritable)
    except orjson.JSONEncodeError:  # an integer past 64 bits, a lone surrogate
        return None
    return text, seen <= _CANONICAL_KINDS


_BOUNDED_FROM = 64 << 10
"""Replies at least this long (bytes) are checked against :func:`longest_match` before they
are parsed; a shorter one parses in well under a millisecond a KiB."""
_PER_BYTE = 8
_PER_HUGE_FLOAT = 312


def longest_match(expected: Any, float_tolerance: float | None = None) -> int | None:
    """An upper bound (bytes) of the driver's JSON of any wire value equal to ``expected``,
    from the length of orjson's text of ``expected``, or None where it gives none.

    Each node of a matching reply is at most :data:`_PER_BYTE` (8) times as long as orjson
    writes the node of ``expected`` it pairs with: a string is the same text, escaped to ASCII
    (a character of two UTF-8 bytes becomes ``\\u00e9``: 3 times); a list may come as a
    ``$tuple`` (``[]`` becomes ``{"$tuple":[]}``: 7 times); a dict as a ``$dict`` of pairs
    (``{}``: 6 times, a pair 2 bytes more than its ``"k":``); a float (3 bytes at least, as
    ``0.0``) as any float's text (24 at most), a ``$float`` tag (17) or an integer within the
    tolerance, which has at most 18 characters below 1e16 with a tolerance of at most 0.5
    (``math.isclose`` allows at most ``(|x| + t) / (1 - t)``, twice ``|x|`` and one);
    integers, booleans and ``null`` are their own text. Above 1e16 orjson writes a float with
    ``e+``: each ``e+`` in the text adds :data:`_PER_HUGE_FLOAT` bytes (the 310 characters of
    an integer near the largest float). ``{"v":`` and ``,"o":[]}`` add 13 bytes.

    None where orjson cannot write ``expected`` (an integer past 64 bits, a nest past its
    depth, a cycle) or the tolerance is above 0.5 (at 1, an integer of any length is within
    it).
    """
    if float_tolerance is not None and float_tolerance > 0.5:
        return None
    try:
        text = orjson.dumps(expected)
    except orjson.JSONEncodeError:
        return None
    return _PER_BYTE * len(text) + _PER_HUGE_FLOAT * text.count(b"e+") + len(_HEAD + _TAIL)


def reply_matches(
    expected: Any, reply: bytes, float_tolerance: float | None = None
) -> tuple[bool, str | None]:
    """Compare a return value, as the bytes of its JSON from the driver, with ``expected``.

    Same verdict and message as :func:`return_value_matches` of the parsed ``reply``, which
    is what runs where the bytes cannot decide. ``reply`` is the driver's compact JSON of a
    wire value it checked (``codec.wire_problem``) and wrote itself (``protocol.dumps``: ASCII,
    integers as Python writes them), not the program's bytes.

    **Equal bytes, a match, without parsing.** Where :func:`expected_json` gives ``text``
    and ``reply == _HEAD + text + _TAIL``, parsing ``reply`` would give ``{"v": P, "o": []}``
    with ``P`` the JSON value of ``text``, and the walk would pair every node of ``expected``
    with the node ``text`` wrote for it: lists of the same length; the same ``int`` (orjson
    writes none past 64 bits, ``jsonparse`` reads each exactly); the same ``bool`` and
    ``None``; the same ``str`` (orjson refuses lone surrogates; its escapes read back to the
    same text); the same finite ``float`` (orjson writes the shortest text that reads back to
    it, ``-0.0`` included), which is within any tolerance of itself. So the walk says equal.
    The bytes are not compared where the walk's rules are not plain JSON equality:
    ``expected_json`` refuses a dict (a ``$dict`` in any order equals it), NaN (equal only to
    NaN, and orjson writes it ``null``), a tuple or another type the walk never matches
    (orjson writes them as lists, strings, numbers), an integer past 64 bits. Bytes that
    differ prove nothing in general (a ``$tuple`` equals a list, an ``int`` a float, a float
    within tolerance or ``-0.0`` equals ``0.0``, ``"é"`` is ``"\\u00e9"`` from the driver and
    not from orjson, ``1e-05`` is ``0.00001``), so they are parsed and walked, but for:

    **Differing bytes of a canonical value, a mismatch, without parsing.** Where ``expected``
    is lists, ``int``, ``bool`` and ``None`` alone, the reply is ``_HEAD + X + _TAIL`` (so its
    ``o`` is empty: the driver's JSON of a non-empty list of objects ends in ``}]``) and ``X``
    holds no ``{`` (so no object: no ``$tuple``, the one node other than a list that the walk
    takes for a list), a walk that said equal would have found in ``X`` exactly the types and
    values of ``expected`` (a string, or a float where it wants an ``int``, ``bool`` or
    ``None``, is a mismatch), and the compact JSON of those has one text, which both the
    driver and orjson write: ``X`` would be ``text``. It is not, so the walk says not equal,
    with no message (no node of ``X`` is a malformed object).

    The work before any parse is linear in ``expected`` (checking its types and writing it:
    about 50 ms for two million integers, the 16 MiB cap's worth) and in ``reply`` (a
    ``memcmp``, or a search for one byte), and is all there is where the bytes decide. It is
    skipped where the reply's value is an object (a tuple, a dict ...), which neither rule
    can use.

    **A reply longer than any match, a mismatch, without parsing.** Where the bytes cannot
    decide, a reply of at least 64 KiB is parsed only if it is no longer than
    :func:`longest_match` of ``expected``: a longer one is no wire value equal to
    ``expected`` (with no message), so a program that returns 16 MiB against a small
    expected value costs the worker a ``len`` and the JSON of the expected value, not the
    parse of its reply (about 1 s at that cap). Its verdict is the walk's, but for a value
    that matches beside objects nothing references (``o``), which the driver's encoder never
    writes: a mismatch here, as it should be.

    Raises:
        ValueError: ``reply`` is not JSON (the driver wrote something it never writes).
        RecursionError: ``reply`` nests deeper than the parser goes (likewise).
    """
    # A reply with objects, or whose value is a tagged one (a tuple, a dict ...), is neither
    # the JSON of an expected value that expected_json writes nor canonical: it is walked
    # without first paying for the expected value's JSON.
    bare = reply.startswith(_HEAD) and reply.endswith(_TAIL) and reply[len(_HEAD)] != _OBJECT
    known = expected_json(expected, len(reply)) if bare else None
    if known is not None:
        text, canonical = known
        if len(reply) == len(_HEAD) + len(text) + len(_TAIL) and reply.startswith(text, len(_HEAD)):
            return True, None
        if canonical and reply.find(b"{", len(_HEAD), len(reply) - len(_TAIL)) < 0:
            return False, None
    if len(reply) >= _BOUNDED_FROM:
        longest = longest_match(expected, float_tolerance)
        if longest is not None and len(reply) > longest:
            return False, None
    return return_value_matches(expected, jsonparse.loads(reply), float_tolerance)
