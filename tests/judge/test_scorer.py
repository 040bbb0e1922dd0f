"""Aggregation, checked by hand."""

from __future__ import annotations

import pytest

from tribunal.judge.scorer import aggregate, reward_term
from tribunal.wire.rubrics import Polarity, Rubric

P2 = Rubric("requirement a", weight=2.0)
P1 = Rubric("requirement b", weight=1.0)
N1 = Rubric("flaw c", Polarity.NEGATIVE, weight=1.0)


def test_reward_term_polarity() -> None:
    assert reward_term(P1, 0.25) == 0.25
    assert reward_term(N1, 0.25) == 0.75


def test_weighted_mean_by_hand() -> None:
    # (2·1.0 + 1·0.5 + 1·(1 - 0.5)) / (2 + 1 + 1) = 3 / 4
    reward, raw = aggregate([(P2, 1.0), (P1, 0.5), (N1, 0.5)], "weighted_mean")
    assert reward == raw == pytest.approx(0.75)
    # A flaw fully present with everything else met: (2 + 1 + 0) / 4
    assert aggregate([(P2, 1.0), (P1, 1.0), (N1, 1.0)], "weighted_mean")[0] == pytest.approx(0.75)
    # Only negative rubrics, none present: 1.
    assert aggregate([(N1, 0.0)], "weighted_mean")[0] == 1.0


def test_dr_tulu_by_hand() -> None:
    # (2·1.0 + 1·0.5 - 1·0.5) / (2 + 1) = 2 / 3
    reward, raw = aggregate([(P2, 1.0), (P1, 0.5), (N1, 0.5)], "dr_tulu")
    assert reward == raw == pytest.approx(2 / 3)
    # Clipped at 0; the raw value is kept.
    reward, raw = aggregate([(P1, 0.0), (N1, 1.0)], "dr_tulu")
    assert (reward, raw) == (0.0, -1.0)
    # No positive rubric: denominator 1.
    assert aggregate([(N1, 0.5)], "dr_tulu") == (0.0, -0.5)


def test_empty_is_refused() -> None:
    with pytest.raises(ValueError):
        aggregate([], "weighted_mean")


@pytest.mark.parametrize("weight", [5e-324, 1e-310, 2.5e-308, 1e-30, 1.0, 1e6])
@pytest.mark.parametrize("mode", ["weighted_mean", "dr_tulu"])
def test_the_reward_does_not_depend_on_the_weights_scale(weight: float, mode: str) -> None:
    # Before, subnormal weights rounded w*s: a half-met rubric paid 0, a three-quarter one 1.
    for scores, expected in (([0.5, 0.5], 0.5), ([0.75, 0.75], 0.75), ([1.0, 0.5], 0.75)):
        scored = [(Rubric(f"r{i}", weight=weight), s) for i, s in enumerate(scores)]
        assert aggregate(scored, mode)[0] == pytest.approx(expected), (weight, scores)  # type: ignore[arg-type]
    mixed = [(Rubric("p", weight=weight), 1.0), (Rubric("n", Polarity.NEGATIVE, weight), 0.5)]
    assert aggregate(mixed, "weighted_mean")[0] == pytest.approx(0.75)
