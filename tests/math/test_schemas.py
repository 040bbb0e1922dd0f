"""The math item and details models (tribunal.wire.math)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tribunal.math import MathConfig, MathScore
from tribunal.wire.math import MathItem, MathOptions


def test_item_accepts_minimal_payload() -> None:
    item = MathItem.model_validate({"id": "a", "response": "#### 18", "ground_truth": "18"})
    assert item.options is None


@pytest.mark.parametrize(
    "payload",
    [
        {"id": "a", "response": "x", "ground_truth": ""},
        {"id": "a", "response": "x"},
        {"id": "a", "response": "x", "ground_truth": "1", "answer": "1"},
        {"id": "a", "response": "x", "ground_truth": "1", "options": {"float_rounding": 16}},
        {"id": "a", "response": "x", "ground_truth": "1", "options": {"timeout": 3}},
    ],
)
def test_item_refuses_bad_payloads(payload: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        MathItem.model_validate(payload)


def test_options_override_config() -> None:
    options = MathOptions(float_rounding=2)
    merged = MathConfig().merged(float_rounding=options.float_rounding, strict=options.strict)
    assert merged == MathConfig(float_rounding=2)


def test_details_from_score() -> None:
    details = MathScore(1.0, "18", "18", "gsm8k_hash", region="response").details()
    assert details.model_dump() == {
        "extracted_answer": "18",
        "extracted_ground_truth": "18",
        "method": "gsm8k_hash",
        "uncommitted": None,
        "region": "response",
    }


@pytest.mark.parametrize("name", ["answer_format", "chat_template"])
def test_an_unknown_format_or_template_is_refused_by_name(name: str) -> None:
    payload = {"id": "a", "response": "x", "ground_truth": "1", "options": {name: "loose"}}
    with pytest.raises(ValidationError) as raised:
        MathItem.model_validate(payload)
    assert raised.value.errors()[0]["loc"] == ("options", name)
