"""verifier.py: items verified in pool processes; their errors come back as item errors."""

from __future__ import annotations

import json

from tests.documents import assert_documented
from tribunal.core.verifier import verifier_info
from tribunal.math.config import MathConfig
from tribunal.math.verifier import MathVerifier
from tribunal.wire.envelope import ItemOutcome, result_json
from tribunal.wire.math import MathItem


def _verifier() -> MathVerifier:
    return MathVerifier(MathConfig(), processes=1, timeout_s=30)


async def _scored(verifier: MathVerifier, items: list[MathItem]) -> list[ItemOutcome]:
    """Score ``items`` on ``verifier``, started and closed here."""
    await verifier.start()
    try:
        return await verifier.score(items)
    finally:
        await verifier.aclose()


async def test_a_bad_ground_truth_raised_in_the_pool_is_that_items_bad_input() -> None:
    good, bad = await _scored(
        _verifier(),
        [
            MathItem(id="good", response="\\boxed{18}", ground_truth="18"),
            MathItem(id="bad", response="\\boxed{18}", ground_truth="\\frac{"),
        ],
    )
    assert good.reward == 1.0 and good.error is None
    assert bad.reward is None and bad.error is not None
    assert (bad.error.code, bad.error.field, bad.error.retryable) == (
        "bad_input",
        "ground_truth",
        False,
    )


def test_the_config_hash_moves_only_with_what_moves_a_reward() -> None:
    # Pinned: the hash of the defaults is the one results were stored under before the
    # configuration moved into pydantic models, and again when issue 28 added relative_tolerance
    # and last_box_only, and issue 36 answer_format and chat_template; change it only
    # on purpose.
    default = MathVerifier(MathConfig(), processes=1, timeout_s=5)
    assert default.config_hash() == "a091c97634bbcfed"
    assert MathVerifier(MathConfig(), processes=8, timeout_s=1).config_hash() == "a091c97634bbcfed"
    changed = MathVerifier(MathConfig(float_rounding=3), processes=1, timeout_s=5)
    assert changed.config_hash() != default.config_hash()


async def test_results_are_what_the_math_document_says() -> None:
    verifier = _verifier()
    outcomes = await _scored(
        verifier,
        [
            MathItem(id="right", response="\\boxed{\\frac{1}{2}}", ground_truth="0.5"),
            MathItem(id="wrong", response="#### 17", ground_truth="18"),
            MathItem(id="none", response="no idea", ground_truth="18"),
            MathItem(id="bad", response="\\boxed{18}", ground_truth="\\frac{"),
        ],
    )
    assert [o.reward for o in outcomes] == [1.0, 0.0, 0.0, None]
    for outcome in outcomes:
        text = result_json("x", outcome, verifier_info(verifier))
        assert_documented("math", "MathItemResult", json.loads(text))


async def test_strict_mode_and_the_reason_reach_an_item() -> None:
    loose, strict, hedged = await _scored(
        _verifier(),
        [
            MathItem(id="loose", response="The answer is 18.", ground_truth="18"),
            MathItem.model_validate(
                {
                    "id": "strict",
                    "response": "The answer is 18.",
                    "ground_truth": "18",
                    "options": {"last_box_only": True},
                }
            ),
            MathItem(id="hedged", response="The answer is 18, or maybe 19.", ground_truth="18"),
        ],
    )
    assert (loose.reward, strict.reward, hedged.reward) == (1.0, 0.0, 0.0)
    assert strict.details["method"] == "none"
    assert hedged.details["uncommitted"] == "hedged"
