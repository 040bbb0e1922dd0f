"""``jsonparse.loads`` gives what ``json.loads`` gives, fast where orjson is exact: orjson
alone reads ``99999999999999999999`` as ``1e+20`` (it did, on every route with a JSON body,
until a LeetCode case with such an argument failed its reference solution)."""

from __future__ import annotations

import json

import orjson
import pytest

from tribunal.wire.jsonparse import _SLICE, loads, orjson_reads_exactly

CASES = [
    b'{"t": 99999999999999999999}',  # what orjson alone reads as 1e+20
    b"[18446744073709551616, -9223372036854775809, 18446744073709551615, -9223372036854775808]",
    b'{"id": "a", "n": 1234567890123456789012345678901234567890}',
    b'{"s": "12345678901234567890", "f": 0.1234567890123456789012, "g": 1.5e300}',
    b'{"nan": NaN, "inf": Infinity, "big": 1e400}',  # orjson refuses all three
    b'{"lone": "\\ud800", "ok": "\\u00e9\\ud83d\\ude00"}',
    b'{"plain": [1, 2.5, true, null, "x", {"y": []}]}',
    '{"utf16": "é"}'.encode("utf-16"),
]


@pytest.mark.parametrize("data", CASES)
def test_the_value_is_json_s_down_to_the_type(data: bytes) -> None:
    expected = json.loads(data)
    got = loads(data)
    assert json.dumps(got) == json.dumps(expected)  # NaN compares unequal to itself
    assert repr(got) == repr(expected)  # an int stays an int, not an equal float


def test_orjson_alone_would_change_the_value() -> None:
    """The guard is needed: if orjson ever reads big integers exactly, this says so."""
    assert orjson.loads(CASES[0]) == {"t": 1e20}
    assert not orjson_reads_exactly(CASES[0])
    assert orjson_reads_exactly(b'{"n": 123456789012345678, "s": "x" }')  # 18 digits: exact


@pytest.mark.parametrize("offset", range(-20, 2))
def test_a_run_of_digits_across_a_slice_end_is_found(offset: int) -> None:
    """The check walks a large body a slice at a time (issue 38): a run of 19 digits cut by
    a slice's end is still found, and one of 18 is still no run."""
    start = _SLICE + offset
    assert not orjson_reads_exactly(b"[" + b" " * (start - 1) + b"9" * 19 + b"]")
    assert orjson_reads_exactly(b"[" + b" " * (start - 1) + b"9" * 18 + b"]")


@pytest.mark.parametrize("data", [b"", b"{", b'{"a": }', b"[1,]", b"\xff\xfe\xfd"])
def test_what_is_not_json_raises_json_s_error(data: bytes) -> None:
    with pytest.raises(ValueError) as expected:
        json.loads(data)
    with pytest.raises(type(expected.value)) as got:
        loads(data)
    assert str(got.value) == str(expected.value)
