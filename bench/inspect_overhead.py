"""What the reward inspector's record costs: math scoring throughput with it on and off.

Run: ``python bench/inspect_overhead.py`` (prints one JSON object). It starts one throwaway
redis-server and two math stacks on it (``tribunal.testing.stack``; each the API and
``--workers`` worker processes of one verification process each, the result cache off so
that every pass scores every item), identical but for ``TRIBUNAL_INSPECT_SAMPLE_RATE``: 1.0
(every item kept: summary and record written to Redis by the worker after its results) and 0
(nothing recorded). Each round (``--rounds``) scores ``--items`` GSM8K gold solutions (the
test split, repeated under new ids) through each stack in turn with the raw loop of
``bench/math_throughput.py`` (batches of 256, 8 requests in flight), in the order on, off in
even rounds and off, on in odd ones, so that load from elsewhere moves both.

``overhead`` is the median over rounds of ``1 - rate on / rate off`` (each round's pair back
to back; ``overhead_rounds`` lists them); ``rates`` are the medians per stack (items/s, first
request to last answer). ``cpu_ms_per_item`` is the median per stack of the CPU time (user +
system) its processes spent in a pass (the API, the workers and their verification
processes; Redis, shared by both, is not counted), per item: on a loaded machine the steadier
of the two figures, and ``cpu_overhead`` its relative difference (``cpu_overhead_rounds``:
each round's). ``kept`` is what each
stack's inspector holds at the end (``/inspect/api/meta``): the cap with recording on, 0 with
it off.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import results
from bench._stack import data_file, redis_server
from bench.raw_loop import raw_loop
from tribunal.testing.stack import RunningService, service_stack


def load_items(n: int) -> list[dict[str, str]]:
    """``n`` GSM8K gold solutions with their answers (the test split, repeated)."""
    with data_file("math/gsm8k_test.jsonl").open() as f:
        answers = [json.loads(line)["answer"] for line in f]
    return [
        {"response": a, "ground_truth": a.split("####")[-1].strip()}
        for a in (answers[i % len(answers)] for i in range(n))
    ]


def rate(base_url: str, items: list[dict[str, Any]]) -> float:
    """Items/s of one pass, first request to last answer; every item must be paid."""
    results, elapsed = asyncio.run(raw_loop(base_url, items))
    assert all(r["reward"] == 1.0 for r in results), "a gold solution was not paid"
    return len(items) / elapsed


def cpu_s(running: RunningService) -> float:
    """CPU seconds (user + system) the stack's processes and their children have used."""
    total = 0.0
    for process in running.processes.values():
        parent = psutil.Process(process.pid)
        for one in [parent, *parent.children(recursive=True)]:
            try:
                times = one.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += times.user + times.system
    return total


def _signed(fraction: float) -> str:
    return f"{100 * fraction:+.1f} %".replace("-", "−")


def tables(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The docs' table: items/s, CPU per item and items kept, on and off, with the overhead
    and the range of the rounds' overheads."""
    rates, cpu = report["rates"], report["cpu_ms_per_item"]

    def rounds(key: str) -> str:
        values = report[key]
        return f"(rounds: {_signed(min(values))} to {_signed(max(values))})"

    return [
        results.table(
            ["", "recording on (rate 1.0)", "recording off", "overhead"],
            [
                [
                    f"items/s (median of {report['rounds']} rounds)",
                    f"{rates['on']:,.0f}",
                    f"{rates['off']:,.0f}",
                    f"{_signed(report['overhead'])} {rounds('overhead_rounds')}",
                ],
                [
                    "CPU ms per item (API, workers, verification processes)",
                    f"{cpu['on']:.4f}",
                    f"{cpu['off']:.4f}",
                    f"{_signed(report['cpu_overhead'])} {rounds('cpu_overhead_rounds')}",
                ],
                [
                    "items kept at the end (cap 5,000)",
                    f"{sum(report['kept']['on'].values()):,}",
                    f"{sum(report['kept']['off'].values()):,}",
                    "",
                ],
            ],
        )
    ]


def main() -> None:
    """Run the comparison and print one JSON object."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    items = load_items(args.items)
    base = {
        "TRIBUNAL_MATH_PROCESSES": "1",
        "TRIBUNAL_CACHE_TTL_S": "0",
        "TRIBUNAL_LOG_LEVEL": "WARNING",
    }
    load_before = os.getloadavg()
    rates: dict[str, list[float]] = {"on": [], "off": []}
    # Each stack's CPU at the start of each of its passes and once after the last, so that a
    # pass's count holds the records written after its last answer too.
    marks: dict[str, list[float]] = {"on": [], "off": []}
    overheads: list[float] = []
    with ExitStack() as stack, redis_server() as url:
        stacks = {
            mode: stack.enter_context(
                service_stack(
                    "math",
                    redis_url=url,
                    workers=args.workers,
                    env={
                        **base,
                        "TRIBUNAL_KEY_PREFIX": f"bench-{mode}",
                        "TRIBUNAL_INSPECT_SAMPLE_RATE": "1.0" if mode == "on" else "0",
                    },
                )
            )
            for mode in ("on", "off")
        }
        for mode, running in stacks.items():  # warm-up: imports, pools, connections
            rate(
                running.base_url, [{"id": f"w{mode}{i}", **it} for i, it in enumerate(items[:512])]
            )
        for n in range(args.rounds):
            order = ("on", "off") if n % 2 == 0 else ("off", "on")
            this_round = {}
            for mode in order:
                fresh = [{"id": f"{mode}{n}-{i}", **it} for i, it in enumerate(items)]
                marks[mode].append(cpu_s(stacks[mode]))
                this_round[mode] = rate(stacks[mode].base_url, fresh)
                rates[mode].append(this_round[mode])
            overheads.append(1 - this_round["on"] / this_round["off"])
        time.sleep(2.0)  # the last records written
        for mode, running in stacks.items():
            marks[mode].append(cpu_s(running))
        kept = {
            mode: httpx.get(f"{running.base_url}/inspect/api/meta", timeout=30).json()["kept"]
            for mode, running in stacks.items()
        }
    cpu_ms = {
        mode: [(b - a) * 1000 / len(items) for a, b in itertools.pairwise(m)]
        for mode, m in marks.items()
    }
    report = {
        "items": args.items,
        "rounds": args.rounds,
        "workers": args.workers,
        "overhead": statistics.median(overheads),
        "overhead_rounds": [round(o, 4) for o in overheads],
        "rates": {mode: round(statistics.median(r), 1) for mode, r in rates.items()},
        "cpu_ms_per_item": {mode: round(statistics.median(c), 4) for mode, c in cpu_ms.items()},
        "cpu_overhead": statistics.median(cpu_ms["on"]) / statistics.median(cpu_ms["off"]) - 1,
        "cpu_overhead_rounds": [
            round(on / off - 1, 4) for on, off in zip(cpu_ms["on"], cpu_ms["off"], strict=True)
        ],
        "kept": kept,
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "cores": os.cpu_count(),
    }
    print(json.dumps(report))
    results.record("inspect_overhead", report, tables(report))


if __name__ == "__main__":
    main()
