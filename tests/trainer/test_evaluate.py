"""pass@k by hand, and an evaluation of a saved tiny model scored over real HTTP."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.trainer.conftest import TRAINER_WARNINGS, base_config
from tribunal.trainer.config import GRPOConfig
from tribunal.trainer.evaluate import evaluate, pass_at_k
from tribunal.trainer.testing import StandInRewardServer

pytestmark = TRAINER_WARNINGS


def test_pass_at_k_is_the_unbiased_estimator() -> None:
    # n=4, c=1: pass@1 = 1/4; pass@2 = 1 - C(3,2)/C(4,2) = 1 - 3/6 = 0.5 (not 1 - 0.75^2)
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)
    assert pass_at_k(5, 2, 3) == pytest.approx(1 - 1 / 10)  # C(3,3) / C(5,3) = 1/10
    assert pass_at_k(4, 0, 4) == 0.0 and pass_at_k(4, 3, 2) == 1.0
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k(2, 1, 3)


@pytest.mark.slow
def test_evaluate_scores_a_saved_model_through_the_reward_service(tiny_model_dir: Path) -> None:
    server = StandInRewardServer(lambda item: float(len(item["response"]) % 2)).start()
    try:
        raw = base_config(tiny_model_dir, server.url, max_prompts=3)
        result = evaluate(GRPOConfig.from_dict(raw), tiny_model_dir, n=4, ks=[1, 4])
    finally:
        server.stop()
    assert result["prompts"] == 3 and result["n"] == 4 and result["unscorable"] == 0
    assert 0.0 <= result["pass@1"] <= result["pass@4"] <= 1.0
    assert server.items_scored == 12
