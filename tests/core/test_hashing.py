"""``json_digest``: as discriminating as canonical JSON, whichever encoder writes the value."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
import pytest

from tribunal.wire.hashing import canonical_json, json_digest

NAN, INF = float("nan"), float("inf")


def test_equal_values_in_another_key_order_share_a_digest() -> None:
    a = {"id": "q", "options": {"x": 1, "y": [1.5, None, True]}, "text": "é"}
    b = {"text": "é", "options": {"y": [1.5, None, True], "x": 1}, "id": "q"}
    assert json_digest(a) == json_digest(b)
    assert json_digest(["toy", [None], [a]]) == json_digest(["toy", [None], [b]])


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ([NAN], [None]),  # orjson writes NaN and infinities as null
        ([INF], [None]),
        ([-INF], [None]),
        ([INF], [-INF]),
        ({"x": {"y": [NAN]}}, {"x": {"y": [None]}}),
        ([1], [1.0]),
        ([1], [True]),
        ([0.0], [-0.0]),
        ([2**64], [2**64 + 1]),  # past 64 bits: orjson refuses, canonical JSON takes it
        ([2**64], [float(2**64)]),
        (["\ud800"], ["\udc00"]),  # lone surrogates: orjson refuses
        (["\ud800"], ["\\ud800"]),
        ({"a": "b"}, {"a": "c"}),
        ([[]], [{}]),
    ],
    ids=repr,
)
def test_values_with_different_canonical_json_get_different_digests(a: Any, b: Any) -> None:
    assert json_digest(a) != json_digest(b)
    assert json_digest(a) == json_digest(a)  # NaN != NaN, yet the same value hashes alike


@pytest.mark.parametrize(
    ("value", "encoder"),
    [
        ({"b": [{"y": None, "x": 1.5}], "a": "é"}, "orjson"),
        ([NAN], "json"),
        ([{"x": INF}], "json"),
        ([2**70], "json"),
        (["\ud800"], "json"),
        ([(1, 2)], "json"),  # not a JSON tree: the canonical encoder decides
    ],
    ids=repr,
)
def test_each_value_is_hashed_by_the_encoder_that_writes_it_exactly(
    value: Any, encoder: str
) -> None:
    if encoder == "orjson":
        text = b"orjson:" + orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    else:  # under another prefix: the two encodings never share a digest
        text = b"json:" + canonical_json(value).encode("utf-8", "surrogatepass")
    assert json_digest(value) == hashlib.sha256(text).hexdigest()
