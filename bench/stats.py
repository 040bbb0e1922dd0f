"""The statistics every benchmark shares: percentiles, this process's CPU time, the load.

One definition each, so two benchmarks' ``p99`` mean the same thing.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Iterable


def percentile(values: Iterable[float], q: float) -> float:
    """The ``q`` quantile (0 to 1) of ``values``, nearest rank from above: the value at index
    ``min(n - 1, floor(q * n))`` of the sorted values (``q=0.5`` is the upper median of an
    even count; ``q=0.99`` of 100 values is the largest). Units are the values'.

    Raises:
        ValueError: ``values`` is empty, or ``q`` is outside 0 to 1.
    """
    if not 0 <= q <= 1:
        raise ValueError(f"q must be within 0 and 1, not {q}")
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def cpu_s() -> float:
    """CPU seconds (user + system) of this process and of its children it has reaped
    (``getrusage``): a sandbox's or a subprocess's CPU counts once it has been waited for."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def load_avg() -> list[float]:
    """The load average over 1, 5 and 15 minutes, to two places: other work shares the cores,
    and a figure moves with it."""
    return [round(x, 2) for x in os.getloadavg()]
