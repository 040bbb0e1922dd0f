"""How a CPU-bound service spreads over the machine's cores: how many worker processes, and
how many verification processes (math) or sandbox slots (code) each one drives.

One worker process hands items to its pool from a single thread, and that thread is what
limits a worker with a large pool (``bench/worker_handover.py``; README, "Scaling with
cores"): it spends 0.15-0.33 ms of its own CPU per math item and 4-5 ms per sandboxed run
(starting the next sandbox, reading its result, the Redis calls), so one code worker cannot
pass ~200 runs/s however many slots it has, and one math worker ~5,000 items/s. By default
a service runs one worker per ``CORES_PER_WORKER`` cores, and the cores are shared out among
its workers: on 2 cores 1 worker x 2, on 16 cores 4 workers x 4.
"""

from __future__ import annotations

import math
import os

CORES_PER_API_PROCESS = 8
"""Cores per HTTP API process by default. One API process spends 1.6 ms of CPU per one-item
request (3 ms per ``/v1/code/run``), so it caps a many-core code service near 300 runs/s and a
cheap-item math service near 17,000-19,000 items/s (the 16-core measurement; two processes
reached 25,900)."""

CORES_PER_WORKER = 4
"""Cores (pool processes or sandbox slots) per worker process by default. At 4 slots a code
worker's thread is about half busy at the slots' full rate, and a math worker keeps 4 sleeping
pool processes ~90 % busy even on 1.5 ms items (``bench/worker_handover.py``)."""


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity: a container's cpuset counts)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def default_workers(cores: int | None = None) -> int:
    """Worker processes for a CPU-bound service: one per ``CORES_PER_WORKER`` cores, rounded
    up (at least 1)."""
    cores = available_cores() if cores is None else cores
    return max(1, math.ceil(cores / CORES_PER_WORKER))


def cores_per_worker(workers: int, cores: int | None = None) -> int:
    """Pool size of each of ``workers`` worker processes: the cores shared out among them,
    rounded up (at least 1)."""
    cores = available_cores() if cores is None else cores
    return max(1, math.ceil(cores / max(1, workers)))


def default_api_processes(cores: int | None = None) -> int:
    """HTTP API processes of a service: one per ``CORES_PER_API_PROCESS`` cores (at least 1)."""
    cores = available_cores() if cores is None else cores
    return max(1, cores // CORES_PER_API_PROCESS)
