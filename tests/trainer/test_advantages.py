"""Advantage formulas on hand-made tensors, against values worked out by hand."""

from __future__ import annotations

import math

import pytest
import torch

from tribunal.trainer.advantages import (
    compute_advantages,
    grpo_advantages,
    overlong_penalty,
    rloo_advantages,
    tool_call_reward,
    zero_variance_groups,
)

NAN = math.nan


def close(actual: torch.Tensor, expected: list[float]) -> None:
    assert actual.tolist() == pytest.approx(expected, abs=1e-4)


def test_grpo_group_std() -> None:
    # group [1, 0, 0, 1]: mean 0.5, std sqrt(1/3) = 0.5774 -> 0.5 / (0.5774 + 1e-4) = 0.8659
    # group [2, 2, 2, 5]: mean 2.75, std 1.5 -> [-0.75, ..., 2.25] / 1.5
    adv = grpo_advantages(torch.tensor([1.0, 0, 0, 1, 2, 2, 2, 5]), 4, "group")
    close(adv, [0.8659, -0.8659, -0.8659, 0.8659, -0.49997, -0.49997, -0.49997, 1.4999])


def test_grpo_batch_std_and_none() -> None:
    rewards = torch.tensor([1.0, 0.0, 3.0, 1.0])
    # centred: [0.5, -0.5, 1, -1]; batch std of [1, 0, 3, 1]:
    # sqrt((0.0625 + 1.5625 + 3.0625 + 0.0625) / 3) = 1.2583
    close(grpo_advantages(rewards, 2, "batch"), [0.3974, -0.3974, 0.7947, -0.7947])
    close(grpo_advantages(rewards, 2, "none"), [0.5, -0.5, 1.0, -1.0])
    close(compute_advantages(rewards, 2, "dr_grpo"), [0.5, -0.5, 1.0, -1.0])


def test_unscorable_rewards_stay_out_of_the_baseline_and_get_zero() -> None:
    # [1, NaN, 0]: baseline is the mean of 1 and 0 (0.5), not of 1, 0, 0
    close(grpo_advantages(torch.tensor([1.0, NAN, 0.0]), 3, "none"), [0.5, 0.0, -0.5])
    close(rloo_advantages(torch.tensor([1.0, NAN, 0.0]), 3), [1.0, 0.0, -1.0])
    close(grpo_advantages(torch.tensor([NAN, NAN]), 2, "group"), [0.0, 0.0])


def test_rloo_leave_one_out() -> None:
    # r = [4, 2, 0]: baselines (2+0)/2=1, (4+0)/2=2, (4+2)/2=3
    close(rloo_advantages(torch.tensor([4.0, 2.0, 0.0]), 3), [3.0, 0.0, -3.0])
    close(compute_advantages(torch.tensor([1.0, 0.0]), 2, "rloo"), [1.0, -1.0])


def test_zero_variance_groups() -> None:
    rewards = torch.tensor([1.0, 1.0, 0.0, 1.0, NAN, 0.5, NAN, NAN])
    assert zero_variance_groups(rewards, 2).tolist() == [True, False, True, True]


def test_overlong_penalty_dapo_ramp() -> None:
    # max 10, buffer 4: no penalty up to 6, linear to -1 at 10, -1 beyond
    close(
        overlong_penalty(torch.tensor([3, 6, 7, 8, 10, 15]), 10, 4, 1.0),
        [0, 0, -0.25, -0.5, -1, -1],
    )
    close(overlong_penalty(torch.tensor([8]), 10, 4, 0.5), [-0.25])


def test_tool_call_reward_only_moves_wrong_answers() -> None:
    rewards = torch.tensor([1.0, -1.0, -1.0, -1.0])
    turns = torch.tensor([5, 2, 6, 30])
    # -1 + 0.05*(6-2) = -0.8; -1 + 0.05*28 = 0.4 -> capped at -0.6
    close(tool_call_reward(rewards, turns), [1.0, -1.0, -0.8, -0.6])


def test_shape_errors_say_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="multiple of group_size=4"):
        grpo_advantages(torch.zeros(6), 4)


def test_unknown_estimator_and_scaling_raise() -> None:
    rewards = torch.tensor([1.0, 0.0])
    with pytest.raises(ValueError, match="unknown advantage estimator 'ppo'"):
        compute_advantages(rewards, 2, "ppo")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown std_scaling 'rank'"):
        compute_advantages(rewards, 2, "grpo", "rank")  # type: ignore[arg-type]
