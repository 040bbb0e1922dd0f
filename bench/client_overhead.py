"""What ``tribunal.client`` costs: ``tribunal score`` against the raw HTTP loop, one stack.

Run: ``python bench/client_overhead.py`` (prints one JSON object). It starts a throwaway
redis-server, the math API and two workers (one verification process each, result cache
off, so every pass scores every item) with ``tribunal.testing.stack``, and scores 10,000
GSM8K items (the 1,319 gold solutions of the test split, repeated under new ids) through:

- ``raw``: the loop ``bench/math_throughput.py`` uses (``bench/raw_loop.py``): ``POST
  /v1/math/score`` with batches of 256, 8 requests in flight, plain httpx, JSON read as dicts;
- ``tribunal score math items.jsonl -o results.jsonl``: chunks of 256, 8 in flight, each one
  ``POST /v1/math/score`` with an ``Idempotency-Key`` that makes it a resumable job, results
  written in order as one JSON line each.

Each round (``--rounds``, 12 by default, fresh ids each time so that no job is found again by
its idempotency key) runs these three one after the other, in this order in even rounds and
with the first and last swapped in odd rounds:

1. the raw loop in this process, timed from its first request to its last answer;
2. ``tribunal score`` as a process; it reports its own rate over the same span (first
   request to last result written), and the process is timed from start to exit;
3. ``bench/raw_loop.py`` as a process, timed from start to exit: the raw loop as a script
   that reads the same file and writes the same results.

``overhead`` is the target's figure, the client's cost in throughput: the median over rounds
of ``1 - tribunal score's rate / the raw script's rate``, each over its scoring span (first
request to last result), both fresh processes doing the same job (steps 2 and 3, back to
back, so that load from elsewhere on the machine moves both; ``overhead_rounds`` lists each
round's). ``start_to_exit`` compares the same two processes start-up included: its
``overhead`` (median over rounds, as above), ``startup_s`` per path (what a process spends
outside its scoring phase: interpreter, imports, reading the input, writing results, exit;
a fixed cost whatever the number of items, in seconds) and ``cpu_s`` per path (user + system
CPU seconds, start to exit). ``in_process`` sets both against the raw loop in this process
(step 1), which has no fresh process to pay for: ``overhead_raw_script`` is what running the
very same loop as a fresh process costs it. Rates are medians over rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import results
from bench._stack import ROOT, data_file
from bench.raw_loop import BATCH, IN_FLIGHT, raw_loop
from tribunal.testing.stack import TRIBUNAL, service_stack

RAW_LOOP = [sys.executable, str(Path(__file__).with_name("raw_loop.py"))]


def load_items(n: int) -> list[dict[str, str]]:
    """``n`` GSM8K gold solutions with their answers (the test split, repeated)."""
    with data_file("math/gsm8k_test.jsonl").open() as f:
        answers = [json.loads(line)["answer"] for line in f]
    return [
        {"response": a, "ground_truth": a.split("####")[-1].strip()}
        for a in (answers[i % len(answers)] for i in range(n))
    ]


def in_process(base_url: str, items: list[dict[str, str]]) -> float:
    """Items/s of the raw loop in this process, first request to last answer."""
    _, elapsed = asyncio.run(raw_loop(base_url, items))
    return len(items) / elapsed


def timed_process(argv: list[str], n_items: int, out: Path) -> tuple[float, float, str]:
    """Run ``argv`` to its end; return items/s from start to exit, its CPU seconds and its
    standard error. Raises when it fails or writes other than one line per item."""
    out.unlink(missing_ok=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, check=True, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    with out.open() as f:
        assert sum(1 for _ in f) == n_items
    return n_items / elapsed, cpu_s, done.stderr


def write_items(items: list[dict[str, str]], path: Path) -> Path:
    """Write ``items`` as JSONL to ``path``."""
    path.write_text("".join(json.dumps(item) + "\n" for item in items))
    return path


def _rate(stderr: str) -> float:
    """The last ``<rate> items/s`` a process printed."""
    return float(re.findall(r"([\d.]+) items/s", stderr)[-1])


def _costs(path: list[float], raw: list[float]) -> list[float]:
    """Per round, ``1 - path / raw`` (each round's pair run back to back)."""
    return [round(1 - p / r, 4) for p, r in zip(path, raw, strict=True)]


def tables(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The docs' table: each path's items/s (medians over rounds) and the client's cost."""

    def pct(cost: float) -> str:
        return f"{100 * cost:.1f} %".replace("-", "−")

    span, inside = result["start_to_exit"], result["in_process"]
    return [
        results.table(
            ["path", "items/s", "cost (target ≤ 5 %; below 0: faster than the raw script)"],
            [
                [
                    "raw loop as a script, scoring span",
                    f"{result['raw_script_items_per_s']:,.0f}",
                    "",
                ],
                [
                    "`tribunal score`, the rate it reports",
                    f"{result['tribunal_score_items_per_s']:,.0f}",
                    pct(result["overhead"]),
                ],
                [
                    "raw loop as a script, start to exit",
                    f"{span['raw_script_items_per_s']:,.0f}",
                    "",
                ],
                [
                    "`tribunal score`, start to exit",
                    f"{span['tribunal_score_items_per_s']:,.0f}",
                    pct(span["overhead"]),
                ],
                [
                    "raw loop in the benchmark's process",
                    f"{inside['raw_items_per_s']:,.0f}",
                    f"against it: `tribunal score` {pct(inside['overhead_tribunal_score'])}; "
                    f"the raw script {pct(inside['overhead_raw_script'])}",
                ],
            ],
        )
    ]


def main() -> None:
    """Run the comparison, print one JSON object and record it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    items = load_items(args.items)
    env = {
        "TRIBUNAL_MATH_PROCESSES": "1",
        "TRIBUNAL_CACHE_TTL_S": "0",
        "TRIBUNAL_LOG_LEVEL": "WARNING",
    }
    load_before = os.getloadavg()
    names = ["raw", "score", "score_process", "raw_script", "raw_script_process"]
    rates: dict[str, list[float]] = {name: [] for name in names}
    cpu_s: dict[str, list[float]] = {"score_process": [], "raw_script_process": []}
    with (
        tempfile.TemporaryDirectory() as tmp,
        service_stack("math", workers=args.workers, env=env) as stack,
    ):
        url, workdir = stack.base_url, Path(tmp)
        out = workdir / "results.jsonl"
        in_process(url, [{"id": f"w{i}", **item} for i, item in enumerate(items[:512])])
        for n in range(args.rounds):

            def raw(n: int = n) -> None:
                fresh = [{"id": f"r{n}-{i}", **item} for i, item in enumerate(items)]
                rates["raw"].append(in_process(url, fresh))

            def score(n: int = n) -> None:
                source = write_items(
                    [{"id": f"s{n}-{i}", **item} for i, item in enumerate(items)],
                    workdir / "score.jsonl",
                )
                argv = [*TRIBUNAL, "score", "math", str(source), "-o", str(out), "--url", url]
                argv += ["--chunk-size", str(BATCH), "--concurrency", str(IN_FLIGHT)]
                wall, cpu, stderr = timed_process(argv, len(items), out)
                rates["score_process"].append(wall)
                rates["score"].append(_rate(stderr))
                cpu_s["score_process"].append(cpu)

            def script(n: int = n) -> None:
                source = write_items(
                    [{"id": f"p{n}-{i}", **item} for i, item in enumerate(items)],
                    workdir / "raw.jsonl",
                )
                argv = [*RAW_LOOP, url, str(source), str(out)]
                wall, cpu, stderr = timed_process(argv, len(items), out)
                rates["raw_script_process"].append(wall)
                rates["raw_script"].append(_rate(stderr))
                cpu_s["raw_script_process"].append(cpu)

            # tribunal score in the middle, the order of the others swapped every round: a
            # drift of the machine's load falls on both sides of each pair alike.
            for step in (raw, score, script) if n % 2 == 0 else (script, score, raw):
                step()

    def median(name: str) -> float:
        return round(statistics.median(rates[name]), 1)

    def overhead(path: str, baseline: str) -> float:
        return round(statistics.median(_costs(rates[path], rates[baseline])), 4)

    def startup_s(phase: str, process: str) -> float:
        pairs = zip(rates[process], rates[phase], strict=True)
        return round(statistics.median(args.items / w - args.items / p for w, p in pairs), 3)

    result: dict[str, Any] = {
        "items": args.items,
        "rounds": args.rounds,
        "workers": args.workers,
        "raw_script_items_per_s": median("raw_script"),
        "tribunal_score_items_per_s": median("score"),
        "overhead": overhead("score", "raw_script"),
        "overhead_rounds": _costs(rates["score"], rates["raw_script"]),
        "start_to_exit": {
            "raw_script_items_per_s": median("raw_script_process"),
            "tribunal_score_items_per_s": median("score_process"),
            "overhead": overhead("score_process", "raw_script_process"),
            "startup_s": {
                "raw_script": startup_s("raw_script", "raw_script_process"),
                "tribunal_score": startup_s("score", "score_process"),
            },
            "cpu_s": {k: round(statistics.median(v), 3) for k, v in cpu_s.items()},
        },
        "in_process": {
            "raw_items_per_s": median("raw"),
            "overhead_tribunal_score": overhead("score", "raw"),
            "overhead_raw_script": overhead("raw_script", "raw"),
        },
        "per_round_items_per_s": {k: [round(v, 1) for v in vs] for k, vs in rates.items()},
        "loadavg_1m_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        "cpus": os.cpu_count(),
        "command": " ".join(["python", "bench/client_overhead.py", *sys.argv[1:]]),
    }
    print(json.dumps(result))
    results.record("client_overhead", result, tables(result))


if __name__ == "__main__":
    main()
