"""Math verifier throughput: Math-Verify in-process vs the service, and the queue alone.

Run: ``python -m bench run math_throughput`` (prints one JSON object and records it, with its
table: ``bench/results/math_throughput.json`` with ``--record``). Items are GSM8K test and
MATH-500 gold solutions scored against their answers. It starts its own redis-server, the
math API and two worker processes (one verification process each), on free ports.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import results, stats
from bench._stack import data_file, free_port, processes, redis_server, tribunal, wait_ready
from bench.raw_loop import BATCH, send_all
from tribunal.client import TribunalClient


def load_items() -> dict[str, list[dict[str, str]]]:
    """GSM8K test (1,319) and MATH-500 (500) gold solutions with their answers."""
    with data_file("math/gsm8k_test.jsonl").open() as f:
        gsm8k = [json.loads(line)["answer"] for line in f]
    with data_file("math/math500_test.jsonl").open() as f:
        math500 = [json.loads(line) for line in f]
    return {
        "gsm8k": [{"response": a, "ground_truth": a.split("####")[-1].strip()} for a in gsm8k],
        "math500": [{"response": r["solution"], "ground_truth": r["answer"]} for r in math500],
    }


WARM_UP = [
    {"response": f"\\boxed{{\\frac{{{k}}}{{97}}}}", "ground_truth": f"{k}/97"} for k in range(1, 65)
]
"""Synthetic items outside both data sets, to load the parsers before anything is timed."""


async def _warm_up(base_url: str) -> None:
    items = [{"id": f"w{i}", **item} for i, item in enumerate(WARM_UP)]
    async with TribunalClient(base_url) as client:
        for start in range(0, len(items), 8):
            await client.score("math", items[start : start + 8])


def baseline(items: list[dict[str, str]]) -> float:
    """Items/s of Math-Verify ``verify(parse(gold), parse(response))`` on one core."""
    from math_verify import parse, verify

    logging.getLogger("math_verify").setLevel(logging.ERROR)
    os.sched_setaffinity(0, {0})
    started = time.perf_counter()
    for item in items:
        gold = parse(f"${item['ground_truth']}$", parsing_timeout=None)
        verify(gold, parse(item["response"], parsing_timeout=None), timeout_seconds=None)
    return len(items) / (time.perf_counter() - started)


async def _send_all(
    client: httpx.AsyncClient, items: list[dict[str, str]]
) -> tuple[float, list[float | None]]:
    """Score ``items`` with the raw loop; return (items/s, rewards)."""
    results, elapsed = await send_all(client, items)
    return len(items) / elapsed, [r["reward"] for r in results]


async def service_throughput(
    base_url: str, items: list[dict[str, str]], rounds: int
) -> dict[str, Any]:
    """Items/s on a first pass (every input new to the service) and on repeated passes, then
    the latency of 256-item batches sent one at a time."""
    async with httpx.AsyncClient(base_url=base_url, timeout=300) as client:
        fresh = [{"id": f"q{i}", **item} for i, item in enumerate(items)]
        first_rate, rewards = await _send_all(client, fresh)
        repeat_rate, more = (
            await _send_all(client, fresh * (rounds - 1)) if rounds > 1 else (0.0, [])
        )
        latencies = []
        for start in range(0, len(fresh), BATCH):
            t0 = time.perf_counter()
            response = await client.post(
                "/v1/math/score", json={"items": fresh[start : start + BATCH]}
            )
            response.raise_for_status()
            latencies.append((time.perf_counter() - t0) * 1000)
    rewards += more
    latencies.sort()
    return {
        "first_pass_items_per_s": first_rate,
        "repeat_items_per_s": repeat_rate,
        "share_rewarded": sum(r == 1.0 for r in rewards) / len(rewards),
        "batch256_p50_ms": statistics.median(latencies),
        "batch256_p99_ms": stats.percentile(latencies, 0.99),
    }


def _noop_worker(redis_url: str, prefix: str) -> None:
    from bench.noop import run_noop_worker

    asyncio.run(run_noop_worker(redis_url, prefix))


async def queue_alone(redis_url: str, n_items: int = 100_000, job_size: int = 1000) -> float:
    """Items/s from submit to results through Redis Streams and two worker processes whose
    verifier does nothing."""
    from bench.noop import submit_and_wait

    workers = [
        multiprocessing.get_context("spawn").Process(
            target=_noop_worker, args=(redis_url, "benchq")
        )
        for _ in range(2)
    ]
    for worker in workers:
        worker.start()
    try:
        return await submit_and_wait(redis_url, "benchq", n_items, job_size)
    finally:
        for worker in workers:
            worker.terminate()
            worker.join()


LABELS = {"gsm8k": "GSM8K test gold solutions", "math500": "MATH-500 gold solutions"}


def tables(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The docs' tables: each data set's throughput against the baseline, then the queue
    alone."""
    rows = [
        [
            f"{LABELS.get(name, name)} ({row['items']:,})",
            f"{row['baseline_math_verify_one_core_items_per_s']:,.0f}",
            f"{row['service_items_per_s']:,.0f}",
            f"{row['service_vs_baseline']:.2f}×",
            f"{row['service_repeat_items_per_s']:,.0f}",
            f"{row['batch256_p50_ms']:.0f} / {row['batch256_p99_ms']:.0f} ms",
        ]
        for name, row in report.items()
        if isinstance(row, dict)
    ]
    columns = [
        "items",
        "baseline items/s",
        "service items/s",
        "ratio",
        "same inputs again, items/s",
        "256-item batch p50 / p99",
    ]
    queue = results.table(
        ["setup", "items/s"],
        [
            [
                "Redis Streams, 2 worker processes whose verifier does nothing, jobs of 1,000 "
                "items",
                f"{report['queue_alone_noop_items_per_s']:,.0f}",
            ]
        ],
        title="The queue alone",
    )
    return [results.table(columns, rows, title="Math-Verify in-process against the service"), queue]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3, help="Passes over each data set.")
    parser.add_argument("--workers", type=int, default=1, help="tribunal worker processes.")
    parser.add_argument(
        "--processes", type=int, default=2, help="Verification processes per worker."
    )
    args = parser.parse_args()
    datasets = load_items()
    report: dict[str, Any] = {"command": "python bench/math_throughput.py", "cores": os.cpu_count()}
    baseline(WARM_UP)
    bases = {name: baseline(items) for name, items in datasets.items()}
    os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
    with redis_server() as redis_url:
        port = free_port()
        env = {
            "TRIBUNAL_REDIS_URL": redis_url,
            "TRIBUNAL_QUEUE": "redis",
            "TRIBUNAL_MATH_PROCESSES": str(args.processes),
            "TRIBUNAL_CACHE_TTL_S": "0",
            "TRIBUNAL_LOG_LEVEL": "WARNING",
        }
        api = tribunal("api", "math", "--port", str(port))
        workers = [tribunal("worker", "math", "--workers", "1") for _ in range(args.workers)]
        with processes([api, *workers], env):
            base_url = f"http://127.0.0.1:{port}"
            wait_ready(base_url)
            asyncio.run(_warm_up(base_url))
            for name, items in datasets.items():
                service = asyncio.run(service_throughput(base_url, items, args.rounds))
                report[name] = {
                    "items": len(items),
                    "baseline_math_verify_one_core_items_per_s": round(bases[name], 1),
                    "service_items_per_s": round(service["first_pass_items_per_s"], 1),
                    "service_vs_baseline": round(
                        service["first_pass_items_per_s"] / bases[name], 2
                    ),
                    "service_repeat_items_per_s": round(service["repeat_items_per_s"], 1),
                    "share_rewarded": round(service["share_rewarded"], 4),
                    "batch256_p50_ms": round(service["batch256_p50_ms"], 1),
                    "batch256_p99_ms": round(service["batch256_p99_ms"], 1),
                }
        report["queue_alone_noop_items_per_s"] = round(asyncio.run(queue_alone(redis_url)), 1)
    report["setup"] = (
        f"HTTP API + Redis + {args.workers} worker process(es) with {args.processes} "
        "verification process(es) each, cache off, "
        "8 requests of 256 items in flight, after a warm-up on 64 synthetic items (both sides "
        "warm). service_items_per_s: first pass, every input new to the service; "
        "service_repeat_items_per_s: the same inputs again (the verification processes keep a "
        "parse cache of 1,024 answers, as repeated answers of a GRPO group would hit); "
        "batch256 latency: one request at a time, after those passes"
    )
    print(json.dumps(report, indent=2))
    results.record("math_throughput", report, tables(report))


if __name__ == "__main__":
    main()
