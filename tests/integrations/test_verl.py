"""verl's compute_score and its batched form against a real gateway and math service."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from tests.conftest import RunningService
from tribunal.integrations.verl import RewardUnavailable, compute_score, compute_score_batch

pytestmark = pytest.mark.e2e


def test_compute_score_single_and_batched(service: Callable[..., RunningService]) -> None:
    memory = {"TRIBUNAL_QUEUE": "memory", "TRIBUNAL_MATH_PROCESSES": "1"}
    math_service = service("math", env=memory)
    gateway = service("gateway", env={**memory, "TRIBUNAL_GATEWAY_MATH_URL": math_service.base_url})
    url = gateway.base_url
    right = compute_score("gsm8k", "so #### 18", "18", {"index": 3}, spec="rloo_math", url=url)
    assert right == {"score": 1.0, "math": 1.0}
    # tcr_agent: num_turns from extra_info (verl's agent loop puts it there), as numpy
    # values, which is how verl's non-tensor batch hands them over.
    scores = compute_score_batch(
        np.array(["aime", "aime"], dtype=object),
        ["\\boxed{4}", "\\boxed{5}"],
        np.array(["4", "4"], dtype=object),
        [{"num_turns": np.int64(2)}, {"num_turns": np.int64(6)}],
        spec="tcr_agent",
        url=url,
    )
    assert [s["score"] for s in scores] == [1.0, pytest.approx(-0.8)]
    assert scores[1]["num_turns"] == 6.0 and scores[1]["overlong"] == 0.0
    assert not math.isnan(scores[0]["correct"])
    # No value stands for "missing" in verl: an unscorable item raises.
    with pytest.raises(RewardUnavailable, match="bad_input"):
        compute_score("gsm8k", "18", None, None, spec="rloo_math", url=url)
