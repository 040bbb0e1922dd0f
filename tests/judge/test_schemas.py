"""The judge item: three rubric shapes, one normalised list, clear validation errors."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from tribunal.wire.judge import JudgeItem, RubricVerdict
from tribunal.wire.rubrics import Polarity

BASE: dict[str, Any] = {"id": "a", "question": "Q?", "response": "R."}


def test_tribunal_shape() -> None:
    item = JudgeItem(
        **BASE,
        rubrics=[
            {"text": "states the dose", "weight": 2, "polarity": "positive", "title": "dose"},
            {"text": "confuses correlation and causation", "polarity": "negative"},
        ],
    )
    rubrics = item.instance_rubrics()
    assert [(r.text, r.polarity, r.weight, r.title) for r in rubrics] == [
        ("states the dose", Polarity.POSITIVE, 2.0, "dose"),
        ("confuses correlation and causation", Polarity.NEGATIVE, 1.0, None),
    ]


def test_dr_tulu_shapes() -> None:
    item = JudgeItem(
        **BASE,
        rubrics=[
            {"description": "cites trials", "weight": 1},
            {"description": "hedges", "weight": -1},
        ],
        positive_rubrics=[{"description": "names the drug", "title": "drug"}, "gives numbers"],
        negative_rubrics=[{"description": "off topic", "title": "pad"}, "invents a trial"],
    )
    got = [(r.text, r.polarity.value, r.weight) for r in item.instance_rubrics()]
    assert got == [
        ("cites trials", "positive", 1.0),
        ("hedges", "negative", 1.0),
        ("names the drug", "positive", 1.0),
        ("gives numbers", "positive", 1.0),
        ("off topic", "negative", 1.0),
        ("invents a trial", "negative", 1.0),
    ]


def test_category_is_kept() -> None:
    item = JudgeItem(
        **BASE,
        rubrics=[{"category": "tool_use", "title": "t", "description": "d", "weight": 3}],
    )
    assert item.instance_rubrics()[0].category == "tool_use"


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        ({"rubrics": [{"text": "a", "description": "b"}]}, "exactly one"),
        ({"rubrics": [{"weight": 1}]}, "exactly one"),
        ({"rubrics": [{"text": "a", "weight": -1, "polarity": "positive"}]}, "contradicts"),
        ({"rubrics": [{"text": "a", "weight": 0}]}, "non-zero"),
        ({"rubrics": [{"text": "a", "polarty": "negative"}]}, "polarty"),
        ({"positive_rubrics": [{"description": "a", "weight": -1}]}, "positive_rubrics"),
        ({"negative_rubrics": [{"text": "a", "polarity": "positive"}]}, "negative_rubrics"),
        ({"positive_rubrics": ["  "]}, "empty"),
        ({"rubrics": [], "rubric_sets": []}, "no rubrics"),
        ({"rubrics": [{"text": "a"}], "rubric_sets": ["v9"]}, "unknown rubric set"),
        ({"rubrics": [{"text": "a"}], "query": "x"}, "query"),
    ],
)
def test_invalid_items(extra: dict[str, Any], match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        JudgeItem(**BASE, **extra)


def test_sets_only_and_default_sets() -> None:
    assert JudgeItem(**BASE, rubric_sets=["v3"]).instance_rubrics() == []
    assert JudgeItem(**BASE).rubric_sets is None  # service default sets apply


def test_empty_response_is_an_item() -> None:
    # An empty completion is the policy's fault: it gets judged (low reward), not refused.
    assert JudgeItem(**{**BASE, "response": ""}, rubric_sets=["general"]).response == ""


def test_verdict_names() -> None:
    assert RubricVerdict.from_level(2, Polarity.POSITIVE) is RubricVerdict.MET
    assert RubricVerdict.from_level(0, Polarity.NEGATIVE) is RubricVerdict.ABSENT
    assert RubricVerdict.from_level(1, Polarity.NEGATIVE) is RubricVerdict.PARTIALLY_PRESENT
