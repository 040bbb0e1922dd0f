"""Advantages of the GRPO family: pure tensor functions, no model, no I/O.

Shapes: ``B`` completions, ``P`` prompts (groups), ``G`` group size, ``B = P·G``; completions of
one group are contiguous (rows ``g·G … g·G+G-1``). Rewards are ``(B,)`` float32 with NaN where
the completion could not be scored: an unscorable completion stays out of its group's baseline
and gets advantage 0 (unscorable is not zero; TRL ``GRPOTrainer``'s NaN rule).
"""

from __future__ import annotations

from typing import Literal, get_args

import torch

StdScaling = Literal["group", "batch", "none"]
AdvantageEstimator = Literal["grpo", "rloo", "dr_grpo"]

_EPS = 1e-4


def _grouped(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    if rewards.dim() != 1 or rewards.numel() % group_size:
        raise ValueError(
            f"rewards must be (B,) with B a multiple of group_size={group_size}; "
            f"got shape {tuple(rewards.shape)}"
        )
    return rewards.view(-1, group_size)


def _nan_mean(x: torch.Tensor) -> torch.Tensor:
    """Mean over the last dim ignoring NaN, ``(P, G) -> (P, 1)``; NaN when all are NaN."""
    valid = ~torch.isnan(x)
    count = valid.sum(-1, keepdim=True)
    total = torch.where(valid, x, torch.zeros_like(x)).sum(-1, keepdim=True)
    return torch.where(count > 0, total / count.clamp(min=1), torch.full_like(total, torch.nan))


def _nan_std(x: torch.Tensor) -> torch.Tensor:
    """Unbiased std over the last dim ignoring NaN, ``(P, G) -> (P, 1)`` (0 with < 2 values)."""
    valid = ~torch.isnan(x)
    count = valid.sum(-1, keepdim=True)
    mean = _nan_mean(x)
    sq = torch.where(valid, (x - mean) ** 2, torch.zeros_like(x)).sum(-1, keepdim=True)
    var = torch.where(count > 1, sq / (count - 1).clamp(min=1), torch.zeros_like(sq))
    return var.sqrt()


def grpo_advantages(
    rewards: torch.Tensor, group_size: int, std_scaling: StdScaling = "group"
) -> torch.Tensor:
    """Group-relative advantages ``(r - mean_group) / std``.

    GRPO (DeepSeekMath, arXiv 2402.03300, §4.1.2): the baseline is the mean reward of the
    group; the scale is the group's std (``"group"``), the std of the whole batch
    (``"batch"``, as in TRL's ``scale_rewards="batch"``), or none (``"none"``: Dr. GRPO,
    arXiv 2503.20783, which shows the std term biases toward too-easy / too-hard prompts).

    Args:
        rewards: (B,) float32, NaN where unscorable.
        group_size: G; B must be a multiple of it.
        std_scaling: how to scale the centred rewards.

    Returns:
        (B,) float32; NaN rewards give 0.0. The std gets ``1e-4`` added (TRL's epsilon).

    Raises:
        ValueError: An unknown ``std_scaling``.

    Examples:
        >>> grpo_advantages(torch.tensor([1.0, 0.0]), 2, "none").tolist()
        [0.5, -0.5]
    """
    grouped = _grouped(rewards, group_size)
    centred = grouped - _nan_mean(grouped)
    if std_scaling == "group":
        centred = centred / (_nan_std(grouped) + _EPS)
    elif std_scaling == "batch":
        flat = rewards[~torch.isnan(rewards)]
        batch_std = flat.std() if flat.numel() > 1 else torch.tensor(0.0)
        centred = centred / (batch_std + _EPS)
    elif std_scaling != "none":
        raise ValueError(
            f"unknown std_scaling {std_scaling!r}; known: {list(get_args(StdScaling))}"
        )
    return torch.nan_to_num(centred.reshape(-1), nan=0.0)


def rloo_advantages(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """Leave-one-out advantages ``r_i - mean_{j≠i} r_j``.

    RLOO (Ahmadian et al., "Back to Basics", arXiv 2402.14740, eq. 6; Kool et al. 2019): each
    completion's baseline is the mean reward of the *other* scorable completions of its group.

    Args:
        rewards: (B,) float32, NaN where unscorable.
        group_size: G.

    Returns:
        (B,) float32; 0.0 for NaN rewards and for a completion with no scorable sibling.

    Examples:
        >>> rloo_advantages(torch.tensor([1.0, 0.0, 0.0]), 3).tolist()
        [1.0, -0.5, -0.5]
    """
    grouped = _grouped(rewards, group_size)
    valid = ~torch.isnan(grouped)
    filled = torch.where(valid, grouped, torch.zeros_like(grouped))
    total = filled.sum(-1, keepdim=True)
    others = valid.sum(-1, keepdim=True) - valid.long()
    baseline = (total - filled) / others.clamp(min=1)
    adv = torch.where(valid & (others > 0), grouped - baseline, torch.zeros_like(grouped))
    return adv.reshape(-1)


def compute_advantages(
    rewards: torch.Tensor,
    group_size: int,
    estimator: AdvantageEstimator,
    std_scaling: StdScaling = "group",
) -> torch.Tensor:
    """Dispatch to the estimator: ``grpo`` (with ``std_scaling``), ``rloo``, or ``dr_grpo``
    (GRPO centring without std, arXiv 2503.20783; its constant loss normaliser is in
    :func:`tribunal.trainer.losses.aggregate`).

    Args:
        rewards: (B,) float32, NaN where unscorable.
        group_size: G.
        estimator: which baseline.
        std_scaling: for ``grpo`` only.

    Returns:
        (B,) float32.

    Raises:
        ValueError: An unknown ``estimator`` (or ``std_scaling``).
    """
    if estimator == "rloo":
        return rloo_advantages(rewards, group_size)
    if estimator == "dr_grpo":
        return grpo_advantages(rewards, group_size, "none")
    if estimator == "grpo":
        return grpo_advantages(rewards, group_size, std_scaling)
    raise ValueError(
        f"unknown advantage estimator {estimator!r}; known: {list(get_args(AdvantageEstimator))}"
    )


def zero_variance_groups(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """Which groups carry no learning signal: all scorable rewards equal (or none scorable).

    DAPO's dynamic sampling (arXiv 2503.14476, §3.2) filters such groups, whose advantages are
    all 0; open-instruct's ``filter_zero_std_samples``.

    Args:
        rewards: (B,) float32, NaN where unscorable.
        group_size: G.

    Returns:
        (P,) bool, True for a group to skip.
    """
    return (_nan_std(_grouped(rewards, group_size)) == 0).reshape(-1)


def overlong_penalty(
    lengths: torch.Tensor, max_tokens: int, buffer_tokens: int, factor: float
) -> torch.Tensor:
    """DAPO's soft overlong punishment (arXiv 2503.14476, eq. 13).

    ``0`` while ``L <= max - buffer``; ``((max - buffer) - L) / buffer · factor`` inside the
    buffer (a linear ramp down to ``-factor``); ``-factor`` beyond ``max``.

    Args:
        lengths: (B,) completion lengths in tokens.
        max_tokens: L_max, the response budget.
        buffer_tokens: L_cache, the length of the ramp.
        factor: the penalty at and past the budget.

    Returns:
        (B,) float32, in ``[-factor, 0]``, added to the reward.

    Examples:
        >>> overlong_penalty(torch.tensor([5, 8, 10, 12]), 10, 4, 1.0).tolist()
        [0.0, -0.5, -1.0, -1.0]
    """
    expected = max_tokens - buffer_tokens
    excess = (lengths.float() - expected).clamp(min=0)
    # + 0.0: an unpunished completion's -0.0 (0 times -factor) reads as 0.0
    return (excess / max(buffer_tokens, 1)).clamp(max=1.0) * -factor + 0.0


def tool_call_reward(
    rewards: torch.Tensor, num_turns: torch.Tensor, per_turn: float = 0.05, cap: float = -0.6
) -> torch.Tensor:
    """GRPO-TCR's tool-call reward: a wrong answer that used tools is penalised less.

    From Open-AgentRL ``recipe/demystify/reward.py`` (DemyAgent, arXiv 2510.11701): for an
    outcome score below 0 (wrong), ``min(cap, r + per_turn · (turns - 2))``; correct answers
    unchanged. Scores here are in ``[-1, 1]`` as in that recipe.

    Args:
        rewards: (B,) float32 outcome scores, NaN where unscorable (kept NaN).
        num_turns: (B,) number of assistant turns of each rollout.
        per_turn: bonus per extra turn.
        cap: the most a wrong answer can earn.

    Returns:
        (B,) float32.
    """
    shaped = torch.minimum(
        torch.full_like(rewards, cap), rewards + per_turn * (num_turns.float() - 2)
    )
    return torch.where(rewards < 0, shaped, rewards)
