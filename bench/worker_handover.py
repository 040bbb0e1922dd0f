"""How many verification processes one worker process keeps busy: a many-core question that
a 2-core machine can answer.

Run: ``python -m bench run worker_handover`` (prints one JSON object and records it:
``bench/results/worker_handover.json`` with ``--record``, or ``worker_handover_math500.json``
with ``-- --math500``; about a minute).

On a 16-core machine a math worker with 14 verification processes kept them 41 % busy
(README, "Scaling with cores"): the limit was the worker's hand-over of items to its pool
(claiming, chunking, Pebble's task and result threads, writing results), not the cores. A
2-core machine cannot run 14 computing processes, but it can run 14 that *sleep*: here the
pool processes sleep ``--item-ms`` per item instead of verifying, so they cost no CPU, and
what is measured is only whether the worker hands them work fast enough. One item in
``--slow-every`` sleeps ``--slow-ms`` instead: verification times are skewed (most MATH
items take a millisecond, a few take tens), and a worker that waits for a batch's slowest
item before claiming again leaves processes idle behind it.

With ``--math500`` the pool processes sleep, item by item, the time ``verify_answer`` took
on each of MATH-500's 500 gold solutions in this process before the run (a first pass:
nothing cached), dealt in a shuffled order: the hand-over of one worker at MATH's own
per-item times (on the 16-core machine the hardware's limit was 3,215 MATH-500 items/s at
14 processes, ~4.4 ms per item per process).

Setup: a throwaway redis-server, ``--items`` items queued up front, one
``WorkerRuntime`` in this process (default batch and concurrency) whose verifier spends
``--main-ms`` of CPU per item in the worker's own thread (what the math worker spends
deciding plain numbers and building results) and then sends the item to a ``DeadlinePool``
of P processes through ``ChunkedCalls``, as the math verifier does. For each P it reports
items/s against the ideal (P processes never idle), the share of the processes' time they were busy
(``busy_share``), and the worker's own CPU per item (all its threads).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import results, stats
from bench._stack import redis_server
from tribunal.core.cache import NoCache
from tribunal.core.chunking import ChunkedCalls
from tribunal.core.pool import DeadlinePool
from tribunal.core.queue.base import QueuedItem
from tribunal.core.queue.keys import Keys
from tribunal.core.queue.redis_streams import RedisStreamsQueue
from tribunal.core.verifier import score_each
from tribunal.core.worker import WorkerRuntime
from tribunal.wire.envelope import ItemOutcome, ScoreItem


def sleep_item(seconds: float) -> float:
    """The pool's work for one item: sleep (no CPU), reward 1."""
    time.sleep(seconds)
    return 1.0


class SleepItem(ScoreItem):
    """An item with nothing to verify: its pool process sleeps ``seconds``."""

    seconds: float = 0.0


class SleepingVerifier:
    """Spends ``main_s`` of CPU in the worker's thread, then the item's time asleep in the
    pool."""

    name = "sleeping"
    version = "1"
    item_model: type[ScoreItem] = SleepItem

    def __init__(self, processes: int, main_s: float) -> None:
        self.processes = processes
        self.main_s = main_s
        self.pool: DeadlinePool | None = None
        self.calls: ChunkedCalls[float] | None = None

    def config_hash(self) -> str:
        return "0" * 16

    def cache_payload(self, item: ScoreItem) -> dict[str, Any] | None:
        return None

    async def start(self) -> None:
        self.pool = DeadlinePool(self.processes)
        self.calls = ChunkedCalls(self.pool, sleep_item, timeout_s=10)

    async def aclose(self) -> None:
        if self.pool is not None:
            self.pool.close()

    async def score_item(self, item: SleepItem) -> ItemOutcome:
        assert self.calls is not None
        started = time.perf_counter()
        while time.perf_counter() - started < self.main_s:
            pass
        return ItemOutcome(reward=await self.calls.run(item.seconds), details={})

    async def score(self, items: Sequence[ScoreItem]) -> list[ItemOutcome]:
        return await score_each(items, SleepItem, self.score_item)


def math500_seconds() -> list[float]:
    """CPU seconds ``verify_answer`` takes on each MATH-500 gold solution, first pass, in
    this process (after a warm-up on items outside the data set)."""
    import logging

    from bench.scaling import WARM, math_items
    from tribunal.math import verify_answer

    logging.getLogger("math_verify").setLevel(logging.ERROR)
    for response, ground_truth in WARM:
        verify_answer(response, ground_truth)
    seconds = []
    for item in math_items(500, 1):
        started = time.process_time()
        verify_answer(item["response"], item["ground_truth"])
        seconds.append(time.process_time() - started)
    return seconds


def item_seconds(args: argparse.Namespace, replay: list[float] | None) -> list[float]:
    """Each item's time asleep in the pool, seconds."""
    if replay is not None:
        order = random.Random(0).sample(range(args.items), args.items)
        return [replay[i % len(replay)] for i in order]
    item_s, slow_s = args.item_ms / 1000, args.slow_ms / 1000
    return [slow_s if i % args.slow_every == 0 else item_s for i in range(args.items)]


async def measure(
    redis_url: str, processes: int, args: argparse.Namespace, seconds: list[float]
) -> dict[str, Any]:
    """Queue the items, run one worker until every job is done; the figures for one P."""
    main_s = args.main_ms / 1000
    pool_s = sum(seconds)
    queue = RedisStreamsQueue(
        redis_url,
        Keys(f"handover-{uuid.uuid4().hex[:8]}"),
        max_queue_items=args.items,
        result_ttl_s=600,
        visibility_timeout_s=60,
    )
    verifier = SleepingVerifier(processes, main_s)
    await verifier.start()
    await queue.ensure_verifier(verifier.name)
    await verifier.score([SleepItem(id="warm")] * processes)  # every process started
    jobs = []
    for start in range(0, args.items, 512):
        n = min(512, args.items - start)
        queued = [
            QueuedItem(i, {"id": f"i{start + i}", "seconds": seconds[start + i]}) for i in range(n)
        ]
        jobs.append((await queue.submit(verifier.name, queued, total=n, prefilled={})).job_id)
    worker = WorkerRuntime(verifier, queue, NoCache())
    me = psutil.Process()
    cpu_before = sum(me.cpu_times()[:2])
    started = time.perf_counter()
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop))
    for job_id in jobs:
        while not (await queue.wait(job_id, 60)).is_done:
            pass
    wall = time.perf_counter() - started
    cpu = sum(me.cpu_times()[:2]) - cpu_before
    stop.set()
    await running
    await verifier.aclose()
    await queue.aclose()
    return {
        "processes": processes,
        "items_per_s": round(args.items / wall),
        "ideal_items_per_s": round(args.items * processes / pool_s),
        "busy_share": round(pool_s / (processes * wall), 3),
        "worker_cpu_ms_per_item": round(cpu / args.items * 1000, 3),
    }


def tables(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The docs' table: one column per process count, the busy share, the worker's CPU per
    item and the items/s against the ideal."""
    runs = report["runs"]
    return [
        results.table(
            ["processes", *(str(run["processes"]) for run in runs)],
            [
                [
                    "share of the processes' time kept busy",
                    *(f"{100 * run['busy_share']:.0f} %" for run in runs),
                ],
                [
                    "worker CPU ms per item",
                    *(f"{run['worker_cpu_ms_per_item']:.2f}" for run in runs),
                ],
                [
                    "items/s (ideal)",
                    *(f"{run['items_per_s']:,} ({run['ideal_items_per_s']:,})" for run in runs),
                ],
            ],
        )
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, nargs="+", default=[2, 4, 8, 14])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--item-ms", type=float, default=1.0, help="Pool time per item.")
    parser.add_argument("--main-ms", type=float, default=0.05, help="Worker CPU per item.")
    parser.add_argument("--slow-every", type=int, default=100, help="One slow item in N.")
    parser.add_argument("--slow-ms", type=float, default=50.0, help="Pool time of a slow item.")
    parser.add_argument(
        "--math500", action="store_true", help="Replay MATH-500's per-item times instead."
    )
    args = parser.parse_args()
    replay = math500_seconds() if args.math500 else None
    seconds = item_seconds(args, replay)
    report: dict[str, Any] = {
        "command": "python bench/worker_handover.py " + " ".join(sys.argv[1:]),
        "cores": os.cpu_count(),
        "load_average_before": os.getloadavg()[0],
        "item_ms": args.item_ms,
        "main_ms": args.main_ms,
        "slow_every": args.slow_every,
        "slow_ms": args.slow_ms,
    }
    if replay is not None:
        report["math500_ms_per_item"] = {
            "mean": round(1000 * statistics.mean(replay), 2),
            "p50": round(1000 * stats.percentile(replay, 0.5), 2),
            "p99": round(1000 * stats.percentile(replay, 0.99), 2),
            "max": round(1000 * max(replay), 2),
        }
        for name in ("item_ms", "slow_every", "slow_ms"):
            del report[name]
    with redis_server() as redis_url:
        report["runs"] = [asyncio.run(measure(redis_url, p, args, seconds)) for p in args.processes]
    report["load_average_after"] = os.getloadavg()[0]
    print(json.dumps(report, indent=2))
    name = "worker_handover_math500" if args.math500 else "worker_handover"
    results.record(name, report, tables(report))


if __name__ == "__main__":
    main()
