"""What ``tribunal.client`` costs: ``tribunal score`` against the raw HTTP loop, one stack.

Run: ``python bench/client_overhead.py`` (prints one JSON object). It starts a throwaway
redis-server, the math API and two workers (one verification process each, result cache
off, so every pass scores every item) with ``tribunal.testing.stack``, and scores 10,000
GSM8K items (the 1,319 gold solutions of the test split, repeated under new ids) through:

- ``raw``: the loop ``bench/math_throughput.py`` uses: ``POST /v1/math/score`` with batches
  of 256, 8 requests in flight, plain httpx, JSON read as dicts;
- ``tribunal_score``: ``tribunal score math items.jsonl -o results.jsonl`` as a process
  (chunks of 256, 8 in flight, each one ``POST /v1/math/score`` with an ``Idempotency-Key``
  that makes it a resumable job, results written in order as one JSON line each), timed
  from process start to exit.

The two alternate for ``--rounds`` rounds (4 by default); each round uses fresh ids, so no
job is found again by its idempotency key. ``overhead`` is ``1 - tribunal_score / raw`` on the
mean rates (process start included); ``overhead_scoring_phase`` uses the rate ``tribunal
score`` itself reports (first submission to last result written, the interpreter's start left
out); the ``*_median`` figures are the same on the median rates, which one round disturbed by
other load on the machine moves less. ``startup_s`` is the mean of what a run spent outside
its scoring phase (start to exit minus the scoring phase: interpreter, imports, reading the
input, exit), in seconds: a fixed cost, whatever the number of items.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._stack import DATA, ROOT
from tribunal.testing.stack import TRIBUNAL, service_stack

BATCH = 256
IN_FLIGHT = 8


def load_items(n: int) -> list[dict[str, str]]:
    """``n`` GSM8K gold solutions with their answers (the test split, repeated)."""
    with (DATA / "math" / "gsm8k_test.jsonl").open() as f:
        answers = [json.loads(line)["answer"] for line in f]
    return [
        {"response": a, "ground_truth": a.split("####")[-1].strip()}
        for a in (answers[i % len(answers)] for i in range(n))
    ]


async def raw_loop(base_url: str, items: list[dict[str, str]]) -> float:
    """Items/s of batches of 256 sent with 8 in flight (the math benchmark's loop)."""
    batches = [items[i : i + BATCH] for i in range(0, len(items), BATCH)]
    semaphore = asyncio.Semaphore(IN_FLIGHT)
    rewards: list[float | None] = []
    async with httpx.AsyncClient(base_url=base_url, timeout=300) as client:

        async def send(batch: list[dict[str, str]]) -> None:
            async with semaphore:
                response = await client.post("/v1/math/score", json={"items": batch})
                response.raise_for_status()
                rewards.extend(r["reward"] for r in response.json()["results"])

        started = time.perf_counter()
        await asyncio.gather(*(send(b) for b in batches))
        elapsed = time.perf_counter() - started
    assert len(rewards) == len(items)
    return len(items) / elapsed


def tribunal_score(
    base_url: str, items: list[dict[str, str]], workdir: Path
) -> tuple[float, float]:
    """Items/s of ``tribunal score`` as a process: start to exit, and as its summary reports
    it (from the first submission to the last result written)."""
    source, out = workdir / "items.jsonl", workdir / "results.jsonl"
    source.write_text("".join(json.dumps(item) + "\n" for item in items))
    out.unlink(missing_ok=True)
    argv = [*TRIBUNAL, "score", "math", str(source), "-o", str(out), "--url", base_url]
    argv += ["--chunk-size", str(BATCH), "--concurrency", str(IN_FLIGHT)]
    started = time.perf_counter()
    done = subprocess.run(argv, check=True, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - started
    with out.open() as f:
        assert sum(1 for _ in f) == len(items)
    reported = re.findall(r"([\d.]+) items/s", done.stderr)[-1]
    return len(items) / elapsed, float(reported)


def main() -> None:
    """Run the comparison and print one JSON object."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    items = load_items(args.items)
    env = {
        "TRIBUNAL_MATH_PROCESSES": "1",
        "TRIBUNAL_CACHE_TTL_S": "0",
        "TRIBUNAL_LOG_LEVEL": "WARNING",
    }
    load_before = os.getloadavg()
    rates: dict[str, list[float]] = {"raw": [], "tribunal_score": [], "scoring_phase": []}
    startup_s: list[float] = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        service_stack("math", workers=args.workers, env=env) as stack,
    ):
        warm = [{"id": f"w{i}", **item} for i, item in enumerate(items[:512])]
        asyncio.run(raw_loop(stack.base_url, warm))
        for n in range(args.rounds):
            fresh = [{"id": f"r{n}-{i}", **item} for i, item in enumerate(items)]
            rates["raw"].append(asyncio.run(raw_loop(stack.base_url, fresh)))
            fresh = [{"id": f"s{n}-{i}", **item} for i, item in enumerate(items)]
            wall, phase = tribunal_score(stack.base_url, fresh, Path(tmp))
            rates["tribunal_score"].append(wall)
            rates["scoring_phase"].append(phase)
            startup_s.append(args.items / wall - args.items / phase)  # seconds
    raw, cli = statistics.mean(rates["raw"]), statistics.mean(rates["tribunal_score"])
    phase = statistics.mean(rates["scoring_phase"])
    median = {k: statistics.median(vs) for k, vs in rates.items()}
    result: dict[str, Any] = {
        "items": args.items,
        "rounds": args.rounds,
        "workers": args.workers,
        "raw_items_per_s": round(raw, 1),
        "tribunal_score_items_per_s": round(cli, 1),
        "overhead": round(1 - cli / raw, 4),
        "tribunal_score_scoring_phase_items_per_s": round(phase, 1),
        "overhead_scoring_phase": round(1 - phase / raw, 4),
        "overhead_median": round(1 - median["tribunal_score"] / median["raw"], 4),
        "overhead_scoring_phase_median": round(1 - median["scoring_phase"] / median["raw"], 4),
        "startup_s": round(statistics.mean(startup_s), 3),
        "per_round": {k: [round(v, 1) for v in vs] for k, vs in rates.items()},
        "loadavg_1m_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        "cpus": os.cpu_count(),
        "command": " ".join(["python", "bench/client_overhead.py", *sys.argv[1:]]),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
