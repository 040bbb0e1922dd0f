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
