"""Cache keys from one canonical encoding: texts that spell a boundary do not collide."""

from __future__ import annotations

import pytest

from tribunal.judge.cache import response_digest, verdict_key
from tribunal.llm.keys import judgment_key


def test_fields_cannot_be_spelled_by_their_neighbours() -> None:
    # The old keys joined fields with NUL: these pairs were one key.
    assert response_digest("ctx", "a\x00b", "c") != response_digest("ctx", "a", "b\x00c")
    assert verdict_key("k", "t\x00positive", "negative") != verdict_key(
        "k\x00positive\x00t", "", "negative"
    )
    assert judgment_key("x", {"a": '1","b":"2'}) != judgment_key("x", {"a": "1", "b": "2"})


def test_kind_and_field_order() -> None:
    assert judgment_key("claim_need", {"t": "x"}) != judgment_key("claim_support", {"t": "x"})
    assert judgment_key("k", {"a": 1, "b": 2}) == judgment_key("k", {"b": 2, "a": 1})
    with pytest.raises(ValueError, match="kind"):
        judgment_key("k", {"kind": "other"})
    assert len(judgment_key("k", {"t": "\ud800"})) == 64  # a lone surrogate still hashes
