"""Loss formulas on hand-made tensors, against values worked out by hand."""

from __future__ import annotations

import math

import pytest
import torch

from tribunal.trainer.losses import (
    aggregate,
    clipped_policy_loss,
    entropy_from_logits,
    kl_penalty,
    truncation_mask,
)


def logs(*ratios: float) -> torch.Tensor:
    return torch.tensor([[math.log(r) for r in ratios]])


def test_clipped_ratio_asymmetric() -> None:
    # ratios 0.5, 1.0, 1.25, 1.5 with A = +1 and eps 0.2 / 0.28: min(ρ, clip(ρ, 0.8, 1.28))
    out = clipped_policy_loss(
        logs(0.5, 1.0, 1.25, 1.5), torch.zeros(1, 4), torch.tensor([1.0]), 0.2, 0.28
    )
    assert out.per_token.tolist()[0] == pytest.approx([-0.5, -1.0, -1.25, -1.28])
    assert out.is_clipped.tolist()[0] == [False, False, False, True]
    # A = -1: -min(-ρ, -clip(ρ)) = max(ρ, clip(ρ)): 0.8, 1, 1.25, 1.5
    out = clipped_policy_loss(
        logs(0.5, 1.0, 1.25, 1.5), torch.zeros(1, 4), torch.tensor([-1.0]), 0.2, 0.28
    )
    assert out.per_token.tolist()[0] == pytest.approx([0.8, 1.0, 1.25, 1.5])
    assert out.is_clipped.tolist()[0] == [True, False, False, False]


def test_dual_clip_caps_negative_advantages() -> None:
    # A = -1, ρ = 5: PPO loss 5; dual clip c = 3 caps it at 3
    out = clipped_policy_loss(
        logs(5.0, 2.0), torch.zeros(1, 2), torch.tensor([-1.0]), 0.2, 0.2, 3.0
    )
    assert out.per_token.tolist()[0] == pytest.approx([3.0, 2.0])
    assert out.is_clipped.tolist()[0] == [True, False]
    # positive advantages are untouched by the dual clip
    out = clipped_policy_loss(logs(5.0), torch.zeros(1, 1), torch.tensor([1.0]), 0.2, 0.2, 3.0)
    assert out.per_token.tolist()[0] == pytest.approx([-1.2])


def test_kl_estimators() -> None:
    # log π = log 0.5, log π_ref = log 0.25: d = log(0.5) = -0.6931
    logp, ref = torch.tensor([[math.log(0.5)]]), torch.tensor([[math.log(0.25)]])
    d = math.log(0.5)
    assert kl_penalty(logp, ref, "k1").item() == pytest.approx(-d)
    assert kl_penalty(logp, ref, "k2").item() == pytest.approx(d * d / 2)
    assert kl_penalty(logp, ref, "k3").item() == pytest.approx(0.5 - d - 1)  # e^d - d - 1
    assert kl_penalty(logp, logp, "k3").item() == 0.0


def test_aggregations() -> None:
    per_token = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    assert aggregate(per_token, mask, "token_mean").item() == pytest.approx(10 / 4)
    assert aggregate(per_token, mask, "token_mean", token_count=8).item() == pytest.approx(10 / 8)
    assert aggregate(per_token, mask, "seq_mean_token_mean").item() == pytest.approx((2 + 4) / 2)
    assert aggregate(per_token, mask, "constant", constant=5).item() == pytest.approx(10 / (2 * 5))
    with pytest.raises(ValueError, match="constant="):
        aggregate(per_token, mask, "constant")
    assert aggregate(per_token, torch.zeros_like(mask), "seq_mean_token_mean").item() == 0.0


@pytest.mark.parametrize("mode", ["token_mean", "seq_mean_token_mean", "constant"])
def test_micro_batches_divided_by_the_step_counts_add_up_to_the_step(mode: str) -> None:
    # What the trainer does: each group's loss over the whole step's denominators.
    per_token = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 0.0], [6.0, 0.0, 0.0], [7.0, 8.0, 9.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0], [0.0, 0.0, 0.0], [1.0, 0.0, 1.0]])
    counts = {
        "token_count": float(mask.sum()),
        "sequence_count": float((mask.sum(-1) > 0).sum()),
        "completion_count": 4.0,
    }
    whole = aggregate(per_token, mask, mode, constant=3)  # type: ignore[arg-type]
    parts = sum(
        aggregate(per_token[i : i + 2], mask[i : i + 2], mode, constant=3, **counts)  # type: ignore[arg-type]
        for i in (0, 2)
    )
    assert float(parts) == pytest.approx(float(whole))


def test_unknown_dispatch_values_raise() -> None:
    x = torch.zeros(2, 2)
    with pytest.raises(ValueError, match="unknown loss aggregation 'sum'"):
        aggregate(x, x, "sum")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown KL estimator 'k9'"):
        kl_penalty(x, x, "k9")  # type: ignore[arg-type]


def test_truncation_mask_and_entropy() -> None:
    mask = torch.ones(2, 3)
    assert truncation_mask(torch.tensor([False, True]), mask).tolist() == [[1, 1, 1], [0, 0, 0]]
    uniform = torch.zeros(1, 1, 4)
    assert entropy_from_logits(uniform).item() == pytest.approx(math.log(4))
