"""The scoring rule: rubric scores -> one reward in [0, 1].

Each rubric i has a score s_i in [0, 1] (how far a requirement is met, or how far a flaw is
present), a weight w_i > 0 and a polarity. Weights enter relative to the largest of the
item's (w_i / max w), which leaves both rules below unchanged and keeps a weight near the
float minimum from rounding its products to 0.

``weighted_mean`` (default)::

    reward = Σ_i w_i·t_i / Σ_i w_i,   t_i = s_i (positive) or 1 - s_i (negative)

so a response that meets every requirement and shows no flaw scores 1, and every rubric
moves the reward by at most its share of the total weight.

``dr_tulu`` (DR Tulu, arXiv 2511.19399; rlresearch/dr-tulu
``open_instruct/search_rewards/longform_rubric_rewards.py``)::

    raw = Σ_i σ_i·w_i·s_i / Σ_{positive} w_i,   σ_i = +1 (positive) or -1 (negative)

then clipped to [0, 1] (``raw`` is kept in details). With no positive rubric the
denominator is 1. Here s_i of a negative rubric means "the flaw is present", which is the
reading DR Tulu's shared prompt leaves to the judge.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tribunal.judge.config import Aggregation
from tribunal.wire.errors import InternalError
from tribunal.wire.rubrics import Polarity, Rubric


def reward_term(rubric: Rubric, score: float) -> float:
    """Return what a rubric contributes to the weighted mean: s, or 1 - s for a flaw."""
    return score if rubric.polarity is Polarity.POSITIVE else 1.0 - score


def aggregate(scored: Sequence[tuple[Rubric, float]], mode: Aggregation) -> tuple[float, float]:
    """Combine rubric scores into a reward.

    Args:
        scored: (rubric, s) pairs, s in [0, 1]; at least one.
        mode: ``weighted_mean`` or ``dr_tulu``.

    Returns:
        (reward in [0, 1], raw aggregate before clipping).

    Raises:
        ValueError: ``scored`` is empty.
        InternalError: An intermediate is not finite (a weight sum overflowed): clipping
            would turn NaN into a reward of 0, which is not a score.

    Examples:
        >>> pos = Rubric("states the dose", weight=2.0)
        >>> neg = Rubric("confuses correlation with causation", Polarity.NEGATIVE)
        >>> aggregate([(pos, 1.0), (neg, 0.5)], "weighted_mean")
        (0.8333333333333334, 0.8333333333333334)
        >>> aggregate([(pos, 1.0), (neg, 0.5)], "dr_tulu")
        (0.75, 0.75)
    """
    if not scored:
        raise ValueError("no rubric scores to aggregate")
    # Weights are used relative to the largest (both rules are ratios of weights, so the
    # reward is the same): a weight near the float minimum (a subnormal) would otherwise
    # round w·s to 0 or to w, so that a half-met rubric paid 0 and a three-quarter one 1.
    top = max(r.weight for r, _ in scored)
    weights = [r.weight / top for r, _ in scored]
    if mode == "weighted_mean":
        total = sum(weights)
        numerator = sum(w * reward_term(r, s) for w, (r, s) in zip(weights, scored, strict=True))
    else:
        pairs = list(zip(weights, scored, strict=True))
        numerator = sum((w if r.polarity is Polarity.POSITIVE else -w) * s for w, (r, s) in pairs)
        positive = [w for w, (r, _) in pairs if r.polarity is Polarity.POSITIVE]
        # No positive rubric: DR Tulu's denominator is 1, in the weights' own units.
        total = sum(positive) if positive else 1.0
        numerator = numerator if positive else numerator * top
    if not (math.isfinite(total) and math.isfinite(numerator) and total > 0):
        raise InternalError(
            f"the {mode} aggregate is not finite (weights sum to {total!r}); no reward given"
        )
    raw = numerator / total
    return min(1.0, max(0.0, raw)), raw
