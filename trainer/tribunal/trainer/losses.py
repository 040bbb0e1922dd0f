"""Policy-gradient losses of the GRPO family: pure tensor functions.

Shapes: ``B`` completions, ``T`` completion tokens (right-padded). ``mask`` is ``(B, T)``
float32, 1 where a token is in the loss (a generated token of a kept completion), 0 for
padding, tool output and masked completions. Log-probabilities are ``(B, T)`` float32.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import torch

Aggregation = Literal["token_mean", "seq_mean_token_mean", "constant"]
KLEstimator = Literal["k1", "k2", "k3"]


@dataclass(frozen=True)
class ClippedLoss:
    """What :func:`clipped_policy_loss` returns.

    Attributes:
        per_token: (B, T) loss per token (before masking).
        ratio: (B, T) importance ratio ``π_θ / π_old``.
        is_clipped: (B, T) bool, True where the clipped term was the active one.
    """

    per_token: torch.Tensor
    ratio: torch.Tensor
    is_clipped: torch.Tensor


def clipped_policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    epsilon_low: float = 0.2,
    epsilon_high: float = 0.2,
    dual_clip: float | None = None,
) -> ClippedLoss:
    """PPO's clipped surrogate per token, with asymmetric clipping and an optional dual clip.

    ``-min(ρ·A, clip(ρ, 1-ε_low, 1+ε_high)·A)`` with ``ρ = exp(logp - old_logp)`` (PPO, arXiv
    1707.06347, eq. 7; GRPO, arXiv 2402.03300, eq. 3). ``ε_high > ε_low`` is DAPO's
    clip-higher (arXiv 2503.14476, §3.1; 0.2 / 0.28). With ``dual_clip = c > 1`` the loss of a
    negative-advantage token is also capped at ``-c·A`` (dual-clip PPO, Ye et al., arXiv
    1912.09729, eq. 5), so a huge ratio cannot blow it up.

    Args:
        logprobs: (B, T) log π_θ of the taken tokens (with grad).
        old_logprobs: (B, T) log π_old at generation time (no grad).
        advantages: (B,) per completion, or (B, T) per token.
        epsilon_low: lower clip range.
        epsilon_high: upper clip range.
        dual_clip: c (> 1) or None.

    Returns:
        :class:`ClippedLoss`.
    """
    adv = advantages.unsqueeze(-1) if advantages.dim() == 1 else advantages
    ratio = torch.exp(logprobs - old_logprobs)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1 - epsilon_low, 1 + epsilon_high) * adv
    surrogate = torch.minimum(unclipped, clipped)
    is_clipped = clipped < unclipped
    if dual_clip is not None:
        floor = dual_clip * adv
        dual = torch.maximum(surrogate, floor)
        surrogate = torch.where(adv < 0, dual, surrogate)
        is_clipped = is_clipped | ((adv < 0) & (floor > torch.minimum(unclipped, clipped)))
    return ClippedLoss(per_token=-surrogate, ratio=ratio, is_clipped=is_clipped)


def kl_penalty(
    logprobs: torch.Tensor, ref_logprobs: torch.Tensor, estimator: KLEstimator = "k3"
) -> torch.Tensor:
    """Per-token estimate of KL(π_θ ‖ π_ref) from samples of π_θ.

    Schulman, "Approximating KL divergence" (2020): with ``d = log π_ref - log π_θ``,
    k1 = ``-d``, k2 = ``d²/2``, k3 = ``exp(d) - d - 1`` (unbiased, non-negative; GRPO's
    choice, arXiv 2402.03300 eq. 4). ``d`` is clamped to ±20 against overflow.

    Args:
        logprobs: (B, T) log π_θ.
        ref_logprobs: (B, T) log π_ref.
        estimator: k1, k2 or k3.

    Returns:
        (B, T) float32.

    Raises:
        ValueError: An unknown ``estimator``.
    """
    d = (ref_logprobs - logprobs).clamp(-20.0, 20.0)
    if estimator == "k1":
        return -d
    if estimator == "k2":
        return 0.5 * d * d
    if estimator == "k3":
        return torch.exp(d) - d - 1
    raise ValueError(f"unknown KL estimator {estimator!r}; known: {list(get_args(KLEstimator))}")


def aggregate(
    per_token: torch.Tensor,
    mask: torch.Tensor,
    mode: Aggregation,
    constant: float | None = None,
    token_count: float | None = None,
    sequence_count: float | None = None,
    completion_count: float | None = None,
) -> torch.Tensor:
    """Reduce a per-token loss to a scalar.

    - ``token_mean``: ``Σ loss·mask / Σ mask`` over the whole batch (DAPO, arXiv 2503.14476,
      §3.3: long completions are not down-weighted).
    - ``seq_mean_token_mean``: mean over tokens of each completion, then over completions
      (the original GRPO, arXiv 2402.03300 eq. 3; has a length bias).
    - ``constant``: ``Σ loss·mask / (B · constant)`` (Dr. GRPO, arXiv 2503.20783, §3.2: a
      fixed normaliser, e.g. the response budget, removes the length bias).

    The counts override the batch's own denominators (``Σ mask``, the completions with a
    token in the loss, ``B``) with a whole step's, so that the losses of micro-batches and
    ranks, each divided by the step's count, add up to the step's aggregate.

    Args:
        per_token: (B, T).
        mask: (B, T) float32 in {0, 1}.
        mode: the aggregation.
        constant: the normaliser of ``constant`` (tokens).
        token_count: the denominator of ``token_mean`` (defaults to ``mask.sum()``).
        sequence_count: the denominator of ``seq_mean_token_mean`` (defaults to the rows with
            a token in the mask).
        completion_count: the ``B`` of ``constant`` (defaults to ``per_token.shape[0]``).

    Returns:
        () scalar; 0 when the mask is empty.

    Raises:
        ValueError: An unknown ``mode``, or ``constant`` without ``constant=``.
    """
    masked = per_token * mask
    if mode == "token_mean":
        count = mask.sum() if token_count is None else torch.tensor(token_count)
        return masked.sum() / count.clamp(min=1)
    if mode == "seq_mean_token_mean":
        per_seq = masked.sum(-1) / mask.sum(-1).clamp(min=1)
        kept = (mask.sum(-1) > 0).float()
        sequences = kept.sum() if sequence_count is None else torch.tensor(sequence_count)
        return (per_seq * kept).sum() / sequences.clamp(min=1)
    if mode == "constant":
        if constant is None:
            raise ValueError(
                "aggregate(mode='constant') needs constant= (e.g. max_response_tokens)"
            )
        completions = per_token.shape[0] if completion_count is None else completion_count
        return masked.sum() / (completions * constant)
    raise ValueError(f"unknown loss aggregation {mode!r}; known: {list(get_args(Aggregation))}")


def truncation_mask(is_truncated: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Drop completions that hit the length limit from the loss.

    DAPO's overlong filtering (arXiv 2503.14476, §3.4): a truncated completion's reward is
    noise about its length, so its tokens are masked.

    Args:
        is_truncated: (B,) bool.
        mask: (B, T) float32.

    Returns:
        (B, T) float32, rows of truncated completions zeroed.
    """
    return mask * (~is_truncated).float().unsqueeze(-1)


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> float:
    """Mean of ``values`` where ``mask`` is 1, as a Python float (0.0 if the mask is empty).

    Args:
        values: (B, T).
        mask: (B, T) float32 or bool.
    """
    mask = mask.float()
    return float((values * mask).sum() / mask.sum().clamp(min=1))


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Per-token entropy of the policy's distribution, ``(B, T, V) -> (B, T)`` (a metric)."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(-1)
