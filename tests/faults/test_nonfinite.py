"""Issue 7, defect 1: a non-finite intermediate is an error or a refused input, never a reward.

Two rubrics of weight 1e308 summed to inf, inf/inf is NaN, and clipping turned NaN into a
cached reward of 0. The judge runs here as real processes on a real Redis against the fake
OpenAI-compatible judge (it stands in for vLLM, which needs a GPU).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import pytest

from tests.conftest import RedisServer, RunningService, redis_env
from tests.core.toy import ToyItem, ToyVerifier, toy_spec
from tribunal.core.app import create_app
from tribunal.core.settings import CoreSettings
from tribunal.judge.scorer import aggregate
from tribunal.llm.testing import FakeOpenAIServer
from tribunal.wire.envelope import ItemOutcome, ScoreItem
from tribunal.wire.errors import InternalError
from tribunal.wire.rubrics import Polarity, Rubric


def _judge_item(item_id: str, weight: float) -> dict[str, Any]:
    return {
        "id": item_id,
        "question": "Q?",
        "response": "A.",
        "rubrics": [{"text": "Answers", "weight": weight}, {"text": "Is short", "weight": weight}],
        "rubric_sets": [],
    }


@pytest.mark.e2e
def test_huge_rubric_weights_are_bad_input_naming_the_field_not_a_reward_of_0(
    service: Callable[..., RunningService],
    redis_server: RedisServer,
    key_prefix: str,
    openai_compat_server: FakeOpenAIServer,
) -> None:
    running = service(
        "judge",
        env=redis_env(
            redis_server,
            key_prefix,
            TRIBUNAL_JUDGE_MODEL="fake-judge",
            TRIBUNAL_JUDGE_BASE_URL=openai_compat_server.base_url,
        ),
    )
    body = {"items": [_judge_item("huge", 1e308), _judge_item("fine", 2.0)]}
    with running.http() as client:
        for _ in range(2):  # the second time would be served from the cache if it were kept
            response = client.post("/v1/judge/score", json=body)
            assert response.status_code == 200, response.text
            huge, fine = response.json()["results"]
            assert huge["reward"] is None and huge["cached"] is False
            assert huge["error"]["code"] == "bad_input"
            assert huge["error"]["field"] == "items.0.rubrics.0.weight"
            assert fine["error"] is None and fine["reward"] == 1.0


@pytest.mark.parametrize("mode", ["weighted_mean", "dr_tulu"])
def test_huge_weights_are_equal_weights_and_an_overflow_raises_instead_of_clipping_nan(
    mode: Any,
) -> None:
    # Static rubric sets are not bounded by the request schema. Weights are used relative to
    # the largest, so equal huge weights pay what equal unit weights pay ...
    huge = [(Rubric("a", weight=1e308), 1.0), (Rubric("b", weight=1e308), 0.5)]
    assert aggregate(huge, mode) == aggregate([(Rubric("a"), 1.0), (Rubric("b"), 0.5)], mode)
    # ... and where a sum stays in the weights' own units (DR Tulu with no positive rubric:
    # its denominator is 1), an overflow is an error, never a NaN clipped to a reward of 0.
    negative = [(Rubric("c", Polarity.NEGATIVE, weight=1e308), 1.0)] * 2
    if mode == "dr_tulu":
        with pytest.raises(InternalError, match="not finite"):
            aggregate(negative, mode)
    else:
        unit = [(Rubric("c", Polarity.NEGATIVE), 1.0)] * 2
        assert aggregate(negative, mode) == aggregate(unit, mode)


class NanVerifier(ToyVerifier):
    """A verifier with a NaN bug: ``text="nan"`` scores NaN, ``"inf"`` scores inf."""

    async def score(self, items: Sequence[ScoreItem]) -> list[ItemOutcome]:
        outcomes = await super().score(items)
        texts = [item.text for item in items if isinstance(item, ToyItem)]
        return [
            ItemOutcome(reward=float(text)) if text in {"nan", "inf"} else outcome
            for text, outcome in zip(texts, outcomes, strict=True)
        ]


async def test_a_non_finite_reward_from_any_verifier_becomes_an_error_and_is_not_cached() -> None:
    verifier = NanVerifier()
    app = create_app(toy_spec(verifier), CoreSettings(queue="memory"))
    items = [{"id": "n", "text": "nan"}, {"id": "i", "text": "inf"}, {"id": "ok", "text": "a"}]
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            for attempt in range(2):
                response = await client.post("/v1/toy/score", json={"items": items})
                assert response.status_code == 200
                nan, inf, ok = response.json()["results"]
                for bad in (nan, inf):
                    assert bad["reward"] is None and bad["cached"] is False
                    assert bad["error"]["code"] == "internal_error"
                    assert "non-finite" in bad["error"]["message"]
                assert ok["reward"] == 1.0 and ok["cached"] is (attempt == 1)
    assert sum(texts.count("nan") for texts in verifier.calls) == 2  # scored again: not cached
    assert not math.isnan(ok["reward"])
