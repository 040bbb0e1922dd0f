"""Where one Redis stops: the Redis CPU time per queued item, and the rate it bounds.

Redis executes commands on one thread, so a single Redis cannot pass ``1000 / ms`` items/s,
where ``ms`` is the CPU milliseconds ``redis-server`` spends per item of the queue's whole
life (submit, claim, result, acknowledge, the job's record). This measures ``ms`` with workers
of a verifier that does nothing (``bench/noop.py``), so every item costs the queue alone:
``W`` worker processes, jobs of ``J`` items submitted and awaited from this process, on a
throwaway ``redis-server``; the CPU time is read from ``/proc`` around the run. The items/s
reached on a small machine is the machines' limit, not Redis's: the figure that carries to a
bigger one is Redis's CPU per item (and so the bound), with Redis's CPU share beside it.

    python bench/redis_ceiling.py --items 50000 20000 --job-size 1000 16 --runs 3

Each job size runs with the items given in the same place (one ``--items`` for all); the
runs and their ranges are recorded (``bench/results/redis_ceiling.json`` with ``--record``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import sys
import uuid
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import results
from bench.noop import run_noop_worker, submit_and_wait
from tribunal.testing.stack import redis_server


def _worker(redis_url: str, prefix: str) -> None:
    asyncio.run(run_noop_worker(redis_url, prefix))


def measure(items: int, job_size: int, workers: int) -> dict[str, float]:
    """One run: items/s, Redis CPU ms per item, the bound it implies, Redis's CPU share."""
    prefix = f"ceiling{uuid.uuid4().hex[:6]}"
    with redis_server() as redis:
        assert redis.process is not None
        server = psutil.Process(redis.process.pid)
        procs = [
            multiprocessing.Process(target=_worker, args=(redis.url, prefix), daemon=True)
            for _ in range(workers)
        ]
        for proc in procs:
            proc.start()
        try:
            # a warm-up job: connections, the stream and its group exist before measuring
            asyncio.run(submit_and_wait(redis.url, prefix, job_size, job_size))
            before = server.cpu_times()
            rate = asyncio.run(submit_and_wait(redis.url, prefix, items, job_size))
            after = server.cpu_times()
        finally:
            for proc in procs:
                proc.terminate()
                proc.join(10)
    cpu_s = (after.user - before.user) + (after.system - before.system)
    ms_per_item = 1000.0 * cpu_s / items
    wall_s = items / rate
    return {
        "items_per_s": round(rate, 1),
        "redis_cpu_ms_per_item": round(ms_per_item, 4),
        "redis_bound_items_per_s": round(1000.0 / ms_per_item),
        "redis_cpu_share": round(cpu_s / wall_s, 3),
    }


def tables(sizes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The docs' table: per job size, the range over runs of each figure."""
    rows = []
    for size in sizes:
        runs = size["runs"]

        def figure(key: str, runs: list[dict[str, float]] = runs) -> list[float]:
            return [run[key] for run in runs]

        rows.append(
            [
                f"{size['job_size']:,} items",
                results.span(figure("redis_cpu_ms_per_item"), ".4f"),
                results.span(figure("redis_bound_items_per_s")),
                results.span(figure("items_per_s")),
                results.span([100 * share for share in figure("redis_cpu_share")], ".0f", " %"),
            ]
        )
    return [
        results.table(
            [
                "jobs of",
                "Redis CPU ms per item",
                "bound (items/s)",
                "reached here (items/s)",
                "Redis busy",
            ],
            rows,
        )
    ]


def main() -> None:
    """Command line: print one JSON object with every run, and record it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--items", type=int, nargs="+", default=[100_000], help="Items per run (<= 10^6)."
    )
    parser.add_argument("--job-size", type=int, nargs="+", default=[1000], help="Items per job.")
    parser.add_argument("--workers", type=int, default=2, help="Noop worker processes.")
    parser.add_argument("--runs", type=int, default=3, help="Runs (<= 10).")
    args = parser.parse_args()
    items = args.items if len(args.items) > 1 else args.items * len(args.job_size)
    if len(items) != len(args.job_size):
        parser.error("give one --items, or one per --job-size")
    if not (all(1 <= n <= 1_000_000 for n in items) and 1 <= args.runs <= 10):
        parser.error("bounded: --items 1..1000000, --runs 1..10")
    if args.workers < 1:
        parser.error("--workers: at least 1")
    sizes = [
        {
            "job_size": job_size,
            "items": n,
            "runs": [measure(n, job_size, args.workers) for _ in range(args.runs)],
        }
        for n, job_size in zip(items, args.job_size, strict=True)
    ]
    report = {"args": vars(args), "sizes": sizes}
    print(json.dumps(report, indent=2))
    results.record("redis_ceiling", report, tables(sizes))


if __name__ == "__main__":
    main()
