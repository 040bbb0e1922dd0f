"""verifier.py: ``score_each`` gathers items and turns item errors into failed outcomes."""

from __future__ import annotations

import asyncio
import logging

import pytest

from tests.core.toy import ToyItem
from tribunal.core.verifier import score_each
from tribunal.wire.envelope import ItemOutcome, ScoreItem
from tribunal.wire.errors import BackendUnavailable, BadInput


async def _score(item: ToyItem) -> ItemOutcome:
    await asyncio.sleep(0.01 * (3 - int(item.id)))  # later items finish first
    if item.id == "1":
        raise BadInput("no answer", field="response")
    if item.id == "2":
        raise BackendUnavailable("down", retry_after_s=4.0)
    if item.id == "3":
        raise KeyError("a bug")
    return ItemOutcome(reward=1.0)


async def test_outcomes_in_order_with_item_errors(caplog: pytest.LogCaptureFixture) -> None:
    items = [ToyItem(id=str(k), text="a") for k in range(4)]
    with caplog.at_level(logging.ERROR):
        outcomes = await score_each(items, ToyItem, _score)
    assert [o.reward for o in outcomes] == [1.0, None, None, None]
    errors = [o.error for o in outcomes[1:]]
    assert [(e.code, e.field, e.retryable) for e in errors if e] == [
        ("bad_input", "response", False),
        ("backend_unavailable", None, True),
        ("internal_error", None, False),
    ]
    assert outcomes[3].error and outcomes[3].error.message == "KeyError: 'a bug'"
    assert any("bug while scoring item 3" in r.message for r in caplog.records)


async def test_an_item_of_another_model_is_an_internal_error() -> None:
    [outcome] = await score_each([ScoreItem(id="x")], ToyItem, _score)
    assert outcome.error and outcome.error.code == "internal_error"
    assert "expected ToyItem" in outcome.error.message
