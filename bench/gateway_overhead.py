"""What the gateway costs: the same batches sent straight to the verifiers and through it.

Starts, as subprocesses on free ports: a throwaway ``redis-server``, the fake OpenAI-compatible
judge model (``tribunal.llm.testing.fake_openai``: each call holds one of ``--cap`` slots for
``--latency-ms``, standing in for vLLM), and the math, judge and citation services and the
gateway, each as ``tribunal api`` + one ``tribunal worker`` on that Redis, as deployed.

Two workloads, each run in rounds, alternating direct and gateway rounds so that both see
the same machine load; a round is 1 batch (a trainer that waits for each batch: the
gateway's added latency shows fully) or ``--in-flight`` batches at once (a trainer that
keeps scoring while it generates, as TRL's async reward functions and Tribunal's trainer do:
the added latency overlaps and what remains is the gateway's CPU cost):

- ``math``: ``--math-items`` MATH-500 gold solutions per batch (from ``shared/data`` or
  ``TRIBUNAL_DATA_DIR``; synthetic one-liners when absent); direct = ``POST /v1/math/score``;
  gateway = ``POST /v1/score`` with the same items as ``{"verifier": "math", ...}``.
- ``refiner``: ``--refiner-items`` rollouts per batch for ``refiner_rubric_citation``
  (2 instance rubrics + the 3 of v3 each, citation in lexical mode); direct = what a trainer
  would do without the gateway: the judge and citation batches concurrently, then
  ``10 * judge + 0.2 * citation`` itself; gateway = ``POST /v1/score`` with ``spec`` items.

Every item is distinct (a run nonce in each response), so no cache answers any of them.
Prints one JSON object: per workload, rounds size and path, items/s over its rounds and the
p50 / p99 batch latency and the CPU time per item of the verifiers' processes and of the
gateway's (children included), and the gateway's overhead: in % of direct throughput (the
target is < 10%), and in % of CPU per item (which other load on the machine moves less).

    .venv/bin/python bench/gateway_overhead.py
    .venv/bin/python bench/gateway_overhead.py --quick
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import results, stats
from bench._stack import (
    DATA,
    fake_judge_argv,
    free_port,
    processes,
    redis_server,
    tribunal,
    wait_ready,
)
from tribunal.client import ItemResult, TribunalClient, rewards

TARGET_OVERHEAD_PCT = 10.0
EVIDENCE = {
    "S1": "The Eiffel Tower is 330 metres tall and stands in Paris.",
    "S2": "It was completed in 1889 for the World's Fair.",
}


MATH500 = DATA / "math" / "math500_test.jsonl"


@functools.cache
def math500() -> list[dict[str, str]]:
    """MATH-500's gold solutions and answers, or synthetic items when the file is absent."""
    if not MATH500.is_file():
        return [
            {"response": f"so \\boxed{{{k % 7}}}", "ground_truth": str(k % 5)} for k in range(500)
        ]
    with MATH500.open() as f:
        rows = [json.loads(line) for line in f]
    return [{"response": r["solution"], "ground_truth": r["answer"]} for r in rows]


def math_items(nonce: str, batch: int, n: int) -> list[dict[str, Any]]:
    """``n`` MATH-500 items, each response prefixed with the run nonce (no cache hits)."""
    rows = math500()
    picked = [rows[(batch * n + i) % len(rows)] for i in range(n)]
    return [
        {
            "id": f"{batch}-{i}",
            "response": f"Run {nonce}, step {batch}.{i}.\n{row['response']}",
            "ground_truth": row["ground_truth"],
        }
        for i, row in enumerate(picked)
    ]


def refiner_items(nonce: str, batch: int, n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"{batch}-{i}",
            "question": "How tall is the Eiffel Tower and when was it built?",
            "response": (
                f"<answer>Run {nonce} item {batch}.{i}. <cite id=S1>The Eiffel Tower is 330 "
                "metres tall.</cite> <cite id=S2>It was completed in 1889.</cite></answer>"
            ),
            "positive_rubrics": ["States the height", "States the year"],
            "negative_rubrics": ["Invents a source"],
            "evidence": EVIDENCE,
        }
        for i in range(n)
    ]


class Paths:
    """The direct and gateway ways of scoring one batch, each through ``tribunal.client``."""

    def __init__(self, clients: dict[str, TribunalClient]) -> None:
        self.clients = clients

    async def _post(self, service: str, items: list[dict[str, Any]]) -> list[ItemResult]:
        return await self.clients[service].score(service, items)

    async def math_direct(self, items: list[dict[str, Any]]) -> list[float | None]:
        return rewards(await self._post("math", items))

    async def math_gateway(self, items: list[dict[str, Any]]) -> list[float | None]:
        tagged = [{**item, "verifier": "math"} for item in items]
        return rewards(await self._post("gateway", tagged))

    async def refiner_direct(self, items: list[dict[str, Any]]) -> list[float | None]:
        judge = [
            {
                k: item[k]
                for k in ("id", "question", "response", "positive_rubrics", "negative_rubrics")
            }
            | {"rubric_sets": ["v3"]}
            for item in items
        ]
        citation = [
            {k: item[k] for k in ("id", "question", "response", "evidence")} for item in items
        ]
        judged, cited = await asyncio.gather(
            self._post("judge", judge),
            self._post("citation", citation),
        )
        return [
            10 * j + 0.2 * c if j is not None and c is not None else None
            for j, c in zip(rewards(judged), rewards(cited), strict=True)
        ]

    async def refiner_gateway(self, items: list[dict[str, Any]]) -> list[float | None]:
        tagged = [{**item, "spec": "refiner_rubric_citation"} for item in items]
        return rewards(await self._post("gateway", tagged))


Batch = Callable[[list[dict[str, Any]]], Awaitable[list[float | None]]]


class CpuMeter:
    """CPU seconds (user + system, children included) of groups of processes."""

    def __init__(self, groups: dict[str, list[int]]) -> None:
        self.groups = {name: [psutil.Process(pid) for pid in pids] for name, pids in groups.items()}

    def read(self) -> dict[str, float]:
        out = {}
        for name, procs in self.groups.items():
            total = 0.0
            for proc in procs:
                # Live descendants by listing; those already reaped through the parent's
                # children_* counters (a math worker replaces its verification processes).
                parent = proc.cpu_times()
                total += parent.children_user + parent.children_system
                for p in [proc, *proc.children(recursive=True)]:
                    with contextlib.suppress(psutil.NoSuchProcess):
                        times = p.cpu_times()
                        total += times.user + times.system
            out[name] = total
        return out


async def compare(
    direct: Batch,
    gateway: Batch,
    make: Callable[[str, int, int], list[dict[str, Any]]],
    rounds: int,
    size: int,
    in_flight: int,
    meter: CpuMeter,
) -> dict[str, Any]:
    """Alternate rounds of ``in_flight`` concurrent batches on each path; per path, items/s
    over its rounds' wall time and the p50 / p99 latency of its batches."""
    nonce = uuid.uuid4().hex[:8]
    await direct(make(f"warm-{nonce}", 0, size))
    await gateway(make(f"warm-{nonce}", 1, size))
    walls: dict[str, list[float]] = {"direct": [], "gateway": []}
    latencies: dict[str, list[float]] = {"direct": [], "gateway": []}
    errors = {"direct": 0, "gateway": 0}
    cpu = {path: dict.fromkeys(meter.groups, 0.0) for path in ("direct", "gateway")}

    async def one(name: str, path: Batch, batch: int) -> None:
        started = time.perf_counter()
        rewards = await path(make(f"{name}-{nonce}", batch, size))
        latencies[name].append(time.perf_counter() - started)
        errors[name] += sum(r is None for r in rewards)

    for round_ in range(rounds):
        order = (("direct", direct), ("gateway", gateway))
        for name, path in order if round_ % 2 == 0 else order[::-1]:
            before = meter.read()
            started = time.perf_counter()
            await asyncio.gather(
                *(one(name, path, round_ * in_flight + k) for k in range(in_flight))
            )
            walls[name].append(time.perf_counter() - started)
            for group, seconds in meter.read().items():
                cpu[name][group] += seconds - before[group]
    out: dict[str, Any] = {
        "rounds": rounds,
        "batches_in_flight": in_flight,
        "items_per_batch": size,
    }
    for name in walls:
        ordered = sorted(latencies[name])
        out[name] = {
            "items_per_s": round(rounds * in_flight * size / sum(walls[name]), 1),
            "p50_batch_ms": round(1000 * statistics.median(ordered), 1),
            "p99_batch_ms": round(1000 * stats.percentile(ordered, 0.99), 1),
            "items_with_errors": errors[name],
            "cpu_ms_per_item": {
                group: round(1000 * seconds / (rounds * in_flight * size), 3)
                for group, seconds in cpu[name].items()
            },
        }
    direct_cpu = sum(out["direct"]["cpu_ms_per_item"].values())
    gateway_cpu = sum(out["gateway"]["cpu_ms_per_item"].values())
    out["cpu_overhead_pct"] = round(100 * (gateway_cpu / direct_cpu - 1), 1)
    overhead = 100 * (1 - out["gateway"]["items_per_s"] / out["direct"]["items_per_s"])
    out["overhead_pct_of_throughput"] = round(overhead, 1)
    out["meets_target"] = overhead < TARGET_OVERHEAD_PCT
    return out


@contextlib.contextmanager
def stack(args: argparse.Namespace) -> Iterator[tuple[dict[str, str], CpuMeter]]:
    """Redis, the fake judge model, math, judge, citation and the gateway (API + worker each)."""
    with redis_server() as redis_url:
        judge_port = free_port()
        ports = {name: free_port() for name in ("math", "judge", "citation", "gateway")}
        urls = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
        env = {
            "TRIBUNAL_REDIS_URL": redis_url,
            "TRIBUNAL_QUEUE": "redis",
            "TRIBUNAL_KEY_PREFIX": f"bench{uuid.uuid4().hex[:6]}",
            "TRIBUNAL_LOG_LEVEL": "WARNING",
            "TRIBUNAL_JUDGE_BASE_URL": f"http://127.0.0.1:{judge_port}/v1",
            "TRIBUNAL_JUDGE_MODEL": "fake-judge",
            "TRIBUNAL_JUDGE_MAX_CONCURRENCY": str(int(1.5 * args.cap)),
            **{f"TRIBUNAL_GATEWAY_{n.upper()}_URL": u for n, u in urls.items() if n != "gateway"},
        }
        argvs = [fake_judge_argv(judge_port, args.latency_ms, args.cap)]
        labels = ["fake_judge"]
        for name, port in ports.items():
            argvs += [
                tribunal("api", name, "--port", str(port)),
                tribunal("worker", name, "--workers", "1"),
            ]
            labels += [name, name]
        with processes(argvs, env) as started:
            for url in urls.values():
                wait_ready(url, 120)
            groups: dict[str, list[int]] = {"verifiers": [], "gateway": []}
            for label, process in zip(labels, started, strict=True):
                if label != "fake_judge":
                    groups["gateway" if label == "gateway" else "verifiers"].append(process.pid)
            yield urls, CpuMeter(groups)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with stack(args) as (urls, meter):
        clients = {name: TribunalClient(url, timeout=600) for name, url in urls.items()}
        try:
            paths = Paths(clients)
            out: dict[str, Any] = {}
            for in_flight in (1, args.in_flight):
                out[f"math_{in_flight}_in_flight"] = await compare(
                    paths.math_direct,
                    paths.math_gateway,
                    math_items,
                    args.rounds,
                    args.math_items,
                    in_flight,
                    meter,
                )
                out[f"refiner_{in_flight}_in_flight"] = await compare(
                    paths.refiner_direct,
                    paths.refiner_gateway,
                    refiner_items,
                    args.rounds,
                    args.refiner_items,
                    in_flight,
                    meter,
                )
        finally:
            await asyncio.gather(*(client.aclose() for client in clients.values()))
    return {
        "command": "python bench/gateway_overhead.py " + " ".join(sys.argv[1:]),
        "settings": {
            "fake_judge_latency_ms": args.latency_ms,
            "fake_judge_cap": args.cap,
            "cpus": os.cpu_count(),
            "load_avg_1m_after": round(os.getloadavg()[0], 2),
        },
        **out,
        "target_overhead_pct": TARGET_OVERHEAD_PCT,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="Rounds per path and workload.")
    parser.add_argument("--in-flight", type=int, default=4, help="Concurrent batches per round.")
    parser.add_argument("--math-items", type=int, default=256, help="Math items per batch.")
    parser.add_argument("--refiner-items", type=int, default=64, help="Refiner rollouts per batch.")
    parser.add_argument("--latency-ms", type=float, default=50.0, help="Fake judge latency.")
    parser.add_argument("--cap", type=int, default=128, help="Fake judge concurrent slots.")
    parser.add_argument("--quick", action="store_true", help="3 rounds of 64 and 16 items.")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.math_items, args.refiner_items = 3, 64, 16
    report = asyncio.run(run(args))
    sys.stdout.write(json.dumps(report, indent=2) + "\n")
    results.record("gateway_overhead", report, tables(report))


WORKLOADS = {"math": "math", "refiner": "refiner_rubric_citation"}


def tables(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The docs' table: per workload, batches at once and path, items/s (the gateway's change
    against direct in brackets), batch p50 / p99 and the CPU per item of the verifiers'
    processes and of the gateway's."""
    rows = []
    parts = [
        (key.partition("_")[0], part)
        for key, part in report.items()
        if key.partition("_")[0] in WORKLOADS and isinstance(part, dict)
    ]
    parts.sort(key=lambda p: (list(WORKLOADS).index(p[0]), p[1]["batches_in_flight"]))
    for workload, part in parts:
        for path in ("direct", "gateway"):
            figures = part[path]
            rate = f"{figures['items_per_s']:,.0f}"
            if path == "gateway":
                change = f"{-part['overhead_pct_of_throughput']:+.1f} %".replace("-", "−")
                rate += f" ({change})"
            cpu = figures["cpu_ms_per_item"]
            rows.append(
                [
                    WORKLOADS[workload],
                    part["batches_in_flight"],
                    path,
                    rate,
                    f"{figures['p50_batch_ms']:,.0f} / {figures['p99_batch_ms']:,.0f}",
                    f"{cpu['verifiers']:.3f} + {cpu['gateway']:.3f}",
                ]
            )
    return [
        results.table(
            [
                "workload",
                "batches at once",
                "path",
                "items/s",
                "batch p50 / p99 ms",
                "CPU ms per item: verifiers + gateway",
            ],
            rows,
        )
    ]


if __name__ == "__main__":
    main()
