"""bench/audit_overhead.py's statistics: the paired overhead per round, the hook's direct
overhead, and their bootstrap intervals (the benchmark's runs are in test_runner.py)."""

from __future__ import annotations

import pytest

from bench.audit_overhead import bootstrap, direct_overheads, overheads


def test_the_overhead_is_the_median_of_each_rounds_ratio_and_its_interval_holds_it() -> None:
    # Round 2 ran at twice the cost of the others for every rate: a ratio within the round
    # cancels it, a ratio of the rates' medians across rounds would not.
    spent = {0.0: [1.0, 1.0, 2.0, 1.0, 1.0], 0.05: [1.02, 1.03, 2.04, 1.01, 1.02]}
    point, interval = overheads(spent)
    assert point["0.05"] == pytest.approx(0.02)
    low, high = interval["0.05"] or (0.0, 0.0)
    assert 0.01 <= low <= 0.02 <= high <= 0.03
    assert (point["0.0"], interval["0.0"]) == (0.0, [0.0, 0.0])
    # One round: no interval.
    assert overheads({0.0: [1.0], 0.05: [1.1]})[1] == {"0.0": None, "0.05": None}


def test_the_direct_overhead_is_the_hooks_extra_cpu_over_a_whole_pass() -> None:
    hooks = {0.0: [0.02, 0.03, 0.02], 0.05: [0.04, 0.05, 0.04], 1.0: [0.32, 0.33, 0.32]}
    point, interval = direct_overheads(hooks, base=[1.0, 1.0, 1.0])
    assert set(point) == {"0.05", "1.0"}
    assert point["0.05"] == pytest.approx(0.02) and point["1.0"] == pytest.approx(0.3)
    assert interval["0.05"] == [pytest.approx(0.02), pytest.approx(0.02)]
    assert direct_overheads({0.0: [0.1], 0.05: [0.2]}, base=[1.0])[1] == {"0.05": None}


def test_a_bootstrap_needs_two_rounds() -> None:
    with pytest.raises(ValueError, match="two rounds"):
        bootstrap(lambda draw: 0.0, 1, seed=0)
