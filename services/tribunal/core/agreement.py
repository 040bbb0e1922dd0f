"""Agreement statistics of a reward with human labels, shared by ``tribunal calibrate``'s
commands (``tribunal.citation.calibrate``, ``tribunal.judge.calibrate``)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence


def cohen_kappa(pairs: Iterable[tuple[bool, bool]]) -> float | None:
    """Cohen's kappa of two binary raters (Cohen 1960): ``(p_o - p_e) / (1 - p_e)``; None
    when the chance agreement is 1 (both raters constant and equal).

    Examples:
        >>> round(cohen_kappa([(True, True), (False, False), (True, False), (False, False)]), 3)
        0.5
    """
    counts = Counter(pairs)
    n = sum(counts.values())
    if n == 0:
        return None
    observed = (counts[(True, True)] + counts[(False, False)]) / n
    a_yes = (counts[(True, True)] + counts[(True, False)]) / n
    b_yes = (counts[(True, True)] + counts[(False, True)]) / n
    expected = a_yes * b_yes + (1 - a_yes) * (1 - b_yes)
    return None if expected >= 1 else (observed - expected) / (1 - expected)


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson's correlation; None when either side is constant or empty."""
    n = len(xs)
    if n < 2:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sx = math.sqrt(sum((x - mx) ** 2 for x in xs))
    sy = math.sqrt(sum((y - my) ** 2 for y in ys))
    if sx == 0 or sy == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / (sx * sy)


def precision_recall(pairs: Iterable[tuple[bool, bool]]) -> tuple[float | None, float | None]:
    """Precision and recall of the second rater's ``True`` against the first's (the human's):
    each None where its denominator is 0 (nothing predicted, nothing actual).

    Examples:
        >>> precision_recall([(True, True), (False, True), (True, False), (True, True)])
        (0.6666666666666666, 0.6666666666666666)
    """
    counts = Counter(pairs)
    tp = counts[(True, True)]
    predicted = tp + counts[(False, True)]
    actual = tp + counts[(True, False)]
    return (tp / predicted if predicted else None, tp / actual if actual else None)


def figure(value: float | None) -> str:
    """A statistic as the calibration reports print it: three decimals, ``n/a`` for None."""
    return "n/a" if value is None else f"{value:.3f}"
