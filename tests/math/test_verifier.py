"""verifier.py: items verified in pool processes; their errors come back as item errors."""

from __future__ import annotations

from tribunal.math.config import MathConfig
from tribunal.math.schemas import MathItem
from tribunal.math.verifier import MathVerifier


async def test_a_bad_ground_truth_raised_in_the_pool_is_that_items_bad_input() -> None:
    verifier = MathVerifier(MathConfig(), processes=1, timeout_s=30)
    await verifier.start()
    try:
        outcomes = await verifier.score(
            [
                MathItem(id="good", response="\\boxed{18}", ground_truth="18"),
                MathItem(id="bad", response="\\boxed{18}", ground_truth="\\frac{"),
            ]
        )
    finally:
        await verifier.aclose()
    good, bad = outcomes
    assert good.reward == 1.0 and good.error is None
    assert bad.reward is None and bad.error is not None
    assert (bad.error.code, bad.error.field, bad.error.retryable) == (
        "bad_input",
        "ground_truth",
        False,
    )


def test_the_config_hash_moves_only_with_what_moves_a_reward() -> None:
    # Pinned: the hash of the defaults is the one results were stored under before the
    # configuration moved into pydantic models; change it only on purpose.
    default = MathVerifier(MathConfig(), processes=1, timeout_s=5)
    assert default.config_hash() == "184153cffe342172"
    assert MathVerifier(MathConfig(), processes=8, timeout_s=1).config_hash() == "184153cffe342172"
    changed = MathVerifier(MathConfig(float_rounding=3), processes=1, timeout_s=5)
    assert changed.config_hash() != default.config_hash()
