"""CPU per item, by process kind, through the services against the same work with no service.

Run: ``python bench/scaling.py`` (prints one JSON object; about a minute on 2 cores).

Scaling with cores is limited by what each item costs the machine beyond the verification
itself, and that cost shows up as CPU time per item, which a small machine measures as well
as a large one. For each verifier this starts a redis-server, the API and ``--workers``
worker processes (result cache off), sends a saturating load, and reads the CPU time of every
process from ``/proc`` (through psutil) before and after, split by kind:

* ``api``: the API process;
* ``worker_main``: the worker processes themselves (claiming, pickling, result writing);
* ``pool``: what runs under the workers: math's verification processes, code's sandboxes
  (reaped children count through their parent's children times);
* ``redis``: the redis-server.

Beside it, the same items with no service: math through ``verify_answer`` in as many
independent processes as the service has verification processes, the items dealt to them at
random as the queue deals them (``hardware_limit_items_per_s``, and their CPU per item), and
in this one process (with Math-Verify's own ``verify(parse(gold), parse(answer))`` for
reference); code through the code verifier's sandbox runner in this process. The top-level
figures:

* ``math_cpu_ratio`` / ``code_cpu_ratio``: service CPU per item over the no-service CPU per
  item (math: the independent processes', which see the same parse-cache hits as the
  service's; targets: at most 1.25 for MATH items, 1.3 for sandboxed runs);
* ``math_pool_busy_share``: CPU time of the verification processes over their number times
  the wall time of the run (they are CPU-bound, so this is how busy they were);
* ``code_slot_busy_share``: runs/s through the service over runs/s of the same runner
  in this process with the same slots, both saturated (the runner with no service keeps
  every slot busy, so the ratio is the share of slot time the service keeps busy).

Options: ``--workers W --processes P`` (math), ``--slots S --code-in-flight K`` (code: K runs
in flight per slot, 4 by default), ``--math-items``,
``--rounds`` (passes over the math items: on many cores one pass is over too soon to
measure), ``--code-runs``, ``--skip-code``. The load average is reported: every figure moves
with what else the machine runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import results
from bench._stack import data_file, free_port, processes, redis_server, tribunal, wait_ready
from tribunal.client import TribunalClient

CODE = "print(sum(range(1000)))"
"""The program of every code run: a real interpreter start, a trivial body."""


def _cpu_s(process: psutil.Process, with_children: bool) -> float:
    """User + system seconds of ``process`` (and of its reaped children)."""
    try:
        times = process.cpu_times()
    except psutil.NoSuchProcess:
        return 0.0
    total = times.user + times.system
    if with_children:
        total += times.children_user + times.children_system
    return total


class CpuMeter:
    """CPU seconds of a service's processes, by kind, between ``start`` and ``stop``.

    The pool processes are found as the live descendants of the worker processes; time of
    descendants that were reaped in between is in their parent's children times.
    """

    def __init__(self, api_pid: int, worker_pids: list[int], redis_pid: int) -> None:
        self.api = psutil.Process(api_pid)
        self.workers = [psutil.Process(pid) for pid in worker_pids]
        self.redis = psutil.Process(redis_pid)

    def _pool(self) -> dict[int, float]:
        pool: dict[int, float] = {}
        for worker in self.workers:
            for child in worker.children(recursive=True):
                pool[child.pid] = _cpu_s(child, with_children=True)
        return pool

    def read(self) -> dict[str, Any]:
        """Return a reading: per-kind CPU seconds and the pool's per-process times."""
        return {
            "api": _cpu_s(self.api, with_children=True),
            "worker_main": sum(_cpu_s(w, with_children=False) for w in self.workers),
            "worker_reaped": sum(
                w.cpu_times().children_user + w.cpu_times().children_system for w in self.workers
            ),
            "pool": self._pool(),
            "redis": _cpu_s(self.redis, with_children=False),
        }

    @staticmethod
    def delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, float]:
        """CPU seconds spent by kind between two readings."""
        pool = sum(after["pool"].values()) - sum(
            before["pool"].get(pid, 0.0) for pid in after["pool"]
        )
        return {
            "api": after["api"] - before["api"],
            "worker_main": after["worker_main"] - before["worker_main"],
            "pool": pool + after["worker_reaped"] - before["worker_reaped"],
            "redis": after["redis"] - before["redis"],
        }


def _per_item_ms(spent: dict[str, float], n: int) -> dict[str, float]:
    """CPU ms per item by kind; ``total`` is the service's (the load generator apart)."""
    per_item = {kind: round(1000 * seconds / n, 3) for kind, seconds in spent.items()}
    per_item["total"] = round(sum(v for kind, v in per_item.items() if kind != "load_generator"), 3)
    return per_item


def _own_cpu_s() -> float:
    return _cpu_s(psutil.Process(), with_children=True)


# -- math ----------------------------------------------------------------------------------


def math_items(n: int, rounds: int) -> list[dict[str, str]]:
    """The first ``n`` (at most 500) MATH-500 gold solutions with their answers, ``rounds``
    times over. With one round every input is distinct; with more, the repeats hit the same
    parse caches in the service's processes as in the no-service runs beside it."""
    with data_file("math/math500_test.jsonl").open() as f:
        rows = [json.loads(line) for line in f][:n]
    return [{"response": row["solution"], "ground_truth": row["answer"]} for row in rows] * rounds


WARM = [(f"\\boxed{{\\frac{{{k}}}{{97}}}}", f"{k}/97") for k in range(1, 65)]
"""Synthetic items outside the data set: they load the parsers before anything is timed."""


def math_no_service(items: list[dict[str, str]]) -> dict[str, float]:
    """CPU ms per item of the same items scored once in this process, with no service.

    Each scorer first runs on :data:`WARM` (imports, grammar), then once over the items:
    a first pass, as the service's is (its parse caches never saw these answers).
    """
    from math_verify import parse, verify

    from tribunal.math import verify_answer

    logging.getLogger("math_verify").setLevel(logging.ERROR)
    pairs = [(item["response"], item["ground_truth"]) for item in items]

    def ours(batch: list[tuple[str, str]]) -> None:
        for response, ground_truth in batch:
            verify_answer(response, ground_truth)

    def math_verify_defaults(batch: list[tuple[str, str]]) -> None:
        for response, ground_truth in batch:
            verify(parse(f"${ground_truth}$"), parse(response))

    return {
        "verify_answer_cpu_ms_per_item": _timed_ms(ours, pairs),
        "math_verify_cpu_ms_per_item": _timed_ms(math_verify_defaults, pairs),
    }


def _score_share(share: list[tuple[str, str]]) -> tuple[int, float]:
    from tribunal.math import verify_answer

    logging.getLogger("math_verify").setLevel(logging.ERROR)
    started = time.process_time()
    for response, ground_truth in share:
        verify_answer(response, ground_truth)
    return len(share), time.process_time() - started


def math_hardware_limit(items: list[dict[str, str]], n_processes: int) -> dict[str, float]:
    """Items/s and CPU ms per item of ``n_processes`` independent processes scoring the items
    with no service: the hardware's limit for this workload (nothing is shared between them,
    and each process's parse cache sees the repeats the service's processes would)."""
    import multiprocessing

    pairs = [(item["response"], item["ground_truth"]) for item in items]
    # Dealt at random, as the queue deals them to the service's processes: with repeated
    # items, each process's parse cache then sees as many repeats as the service's would.
    rng = random.Random(0)
    shares: list[list[tuple[str, str]]] = [[] for _ in range(n_processes)]
    for pair in pairs:
        shares[rng.randrange(n_processes)].append(pair)
    with multiprocessing.get_context("forkserver").Pool(n_processes) as pool:
        pool.map(_score_share, [WARM] * n_processes)
        started = time.perf_counter()
        done = pool.map(_score_share, shares)
        wall = time.perf_counter() - started
    return {
        "items_per_s": round(len(pairs) / wall, 1),
        "cpu_ms_per_item": round(1000 * sum(cpu for _, cpu in done) / len(pairs), 3),
    }


def _timed_ms(work: Callable[[list[tuple[str, str]]], None], pairs: list[tuple[str, str]]) -> float:
    work(WARM)
    started = time.process_time()
    work(pairs)
    return round(1000 * (time.process_time() - started) / len(pairs), 3)


async def _saturate(
    base_url: str, verifier: str, items: list[dict[str, Any]], batch: int, in_flight: int
) -> list[Any]:
    """Score ``items`` in batches, ``in_flight`` requests at a time; return the results
    (``code_run``: one ``POST /v1/code/run`` per program, as an agent's tool calls arrive)."""
    if verifier == "code_run":
        return await _run_programs(base_url, items, in_flight)
    semaphore = asyncio.Semaphore(in_flight)
    async with TribunalClient(base_url, max_concurrency=in_flight, timeout=600) as client:

        async def send(chunk: list[dict[str, Any]]) -> list[Any]:
            async with semaphore:
                return list(await client.score(verifier, chunk))

        chunks = [items[i : i + batch] for i in range(0, len(items), batch)]
        results: list[Any] = []
        for part in await asyncio.gather(*(send(c) for c in chunks)):
            results.extend(part)
        return results


async def _run_programs(base_url: str, items: list[dict[str, Any]], in_flight: int) -> list[Any]:
    """Run each item once (``TribunalClient.run_code``), ``in_flight`` at a time; return the
    runs (``RunDetails``)."""
    semaphore = asyncio.Semaphore(in_flight)
    async with TribunalClient(base_url, max_concurrency=in_flight, timeout=600) as client:

        async def run(item: dict[str, Any]) -> Any:
            async with semaphore:
                return await client.run_code(item)

        return list(await asyncio.gather(*(run(item) for item in items)))


def _measure_service(
    verifier: str,
    service: str,
    env: dict[str, str],
    workers: int,
    items: list[dict[str, Any]],
    warm: list[dict[str, Any]],
    batch: int,
    in_flight: int,
) -> tuple[dict[str, float], float, list[Any]]:
    """Start the service, warm it, score ``items``; return (CPU s by kind, wall s, results)."""
    with redis_server() as redis_url:
        port = free_port()
        env = {
            "TRIBUNAL_REDIS_URL": redis_url,
            "TRIBUNAL_QUEUE": "redis",
            "TRIBUNAL_CACHE_TTL_S": "0",
            "TRIBUNAL_LOG_LEVEL": "WARNING",
            **env,
        }
        argvs = [tribunal("api", service, "--port", str(port))]
        argvs += [tribunal("worker", service, "--workers", "1") for _ in range(workers)]
        with processes(argvs, env) as started:
            base_url = f"http://127.0.0.1:{port}"
            wait_ready(base_url)
            asyncio.run(_saturate(base_url, verifier, warm, batch, in_flight))
            redis_pid = _redis_pid(redis_url)
            meter = CpuMeter(started[0].pid, [p.pid for p in started[1:]], redis_pid)
            before, own_before = meter.read(), _own_cpu_s()
            t0 = time.perf_counter()
            results = asyncio.run(_saturate(base_url, verifier, items, batch, in_flight))
            wall = time.perf_counter() - t0
            spent = CpuMeter.delta(before, meter.read())
            # Not the service's: the load generator (this process), to show when it is the
            # limit rather than the service.
            spent["load_generator"] = _own_cpu_s() - own_before
            return spent, wall, results


def _redis_pid(redis_url: str) -> int:
    port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    for process in psutil.process_iter(["name", "cmdline"]):
        cmdline = process.info["cmdline"] or []
        if process.info["name"] == "redis-server" and str(port) in " ".join(cmdline):
            return int(process.pid)
    raise SystemExit(f"no redis-server on port {port}")


def bench_math(args: argparse.Namespace) -> dict[str, Any]:
    """The math part of the report."""
    items = math_items(args.math_items, args.rounds)
    baseline = math_no_service(items)
    fresh = [{"id": f"m{i}", **item} for i, item in enumerate(items)]
    warm = [{"id": f"w{k}", "response": r, "ground_truth": g} for k, (r, g) in enumerate(WARM)]
    env = {"TRIBUNAL_MATH_PROCESSES": str(args.processes)}
    # Requests of 64 items in flight: twice what the workers hold at once (4 batches of 64
    # each, the default), so that the queue is never empty while results travel back, and
    # enough that every verification process has work queued.
    in_flight = max(8 * args.workers, 2 * args.workers * args.processes)
    spent, wall, results = _measure_service(
        "math", "math", env, args.workers, fresh, warm, batch=64, in_flight=in_flight
    )
    per_item = _per_item_ms(spent, len(items))
    pool_processes = args.workers * args.processes
    limit = math_hardware_limit(items, pool_processes)
    baseline["parallel_cpu_ms_per_item"] = limit["cpu_ms_per_item"]
    return {
        "hardware_limit_items_per_s": limit["items_per_s"],
        "share_of_hardware_limit": round(len(items) / wall / limit["items_per_s"], 3),
        "items": len(items),
        "setup": f"{args.workers} worker(s) x {args.processes} verification process(es)",
        "wall_s": round(wall, 2),
        "items_per_s": round(len(items) / wall, 1),
        "share_rewarded": _share_rewarded(results),
        "service_cpu_ms_per_item": per_item,
        "no_service": baseline,
        "pool_busy_share": round(spent["pool"] / (pool_processes * wall), 3),
    }


def _share_rewarded(results: Iterable[Any]) -> float:
    rewards = [r.reward for r in results]
    return round(sum(r == 1.0 for r in rewards) / max(1, len(rewards)), 4)


# -- code ----------------------------------------------------------------------------------


async def _code_no_service(n: int, in_flight: int) -> dict[str, float]:
    """CPU ms and wall ms per run of the code runner in this process (no API, queue, worker)."""
    from tribunal.code.settings import CodeSettings
    from tribunal.code.verifier import CodeRunVerifier
    from tribunal.wire.code import RunItem

    verifier = CodeRunVerifier(CodeSettings().code.config())
    await verifier.start()
    try:
        items = [RunItem(id=f"c{i}", language="python", code=CODE) for i in range(n)]
        await verifier.score(items[:in_flight])
        semaphore = asyncio.Semaphore(in_flight)

        async def one(item: RunItem) -> None:
            async with semaphore:
                await verifier.score([item])

        cpu0, t0 = _own_cpu_s(), time.perf_counter()
        await asyncio.gather(*(one(item) for item in items))
        cpu, wall = _own_cpu_s() - cpu0, time.perf_counter() - t0
    finally:
        await verifier.aclose()
    return {
        "cpu_ms_per_run": round(1000 * cpu / n, 3),
        "wall_ms_per_run_at_concurrency": round(1000 * wall * in_flight / n, 3),
        "runs_per_s": round(n / wall, 1),
    }


def bench_code(args: argparse.Namespace) -> dict[str, Any]:
    """The code part of the report."""
    baseline = asyncio.run(_code_no_service(args.code_runs, args.slots))
    runs = [{"id": f"r{i}", "language": "python", "code": CODE} for i in range(args.code_runs)]
    warm = runs[: 2 * args.slots]
    env = {"TRIBUNAL_CODE_SLOTS": str(args.slots)}
    # One run per request, as a tool call is: the next run of a slot must already be queued
    # when one ends, while its result still travels back, so a saturating load keeps several
    # runs per slot in flight (at 2 per slot, one slot was idle ~14 % of the time on 2 cores).
    in_flight = args.code_in_flight * args.slots
    spent, wall, results = _measure_service(
        "code_run", "code", env, 1, runs, warm, batch=1, in_flight=in_flight
    )
    per_item = _per_item_ms(spent, len(runs))
    return {
        "runs": len(runs),
        "setup": f"1 worker, {args.slots} sandbox slot(s), "
        f"{args.code_in_flight} x slots requests in flight",
        "wall_s": round(wall, 2),
        "runs_per_s": round(len(runs) / wall, 1),
        "not_accepted": sum(r.verdict != "accepted" for r in results),
        "service_cpu_ms_per_run": per_item,
        "no_service": baseline,
        "slot_busy_share": round(len(runs) / wall / baseline["runs_per_s"], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=1, help="Math worker processes.")
    parser.add_argument("--processes", type=int, default=2, help="Verification processes each.")
    parser.add_argument("--slots", type=int, default=2, help="Code sandbox slots.")
    parser.add_argument("--math-items", type=int, default=500, help="At most 500.")
    parser.add_argument("--rounds", type=int, default=1, help="Passes over the math items.")
    parser.add_argument("--code-runs", type=int, default=400)
    parser.add_argument("--code-in-flight", type=int, default=4, help="Runs in flight per slot.")
    parser.add_argument("--skip-code", action="store_true")
    results.add_record_argument(parser)
    args = parser.parse_args()
    report: dict[str, Any] = {
        "command": "python bench/scaling.py " + " ".join(sys.argv[1:]),
        "cores": os.cpu_count(),
        "load_average_before": os.getloadavg()[0],
    }
    report["math"] = math = bench_math(args)
    report["math_cpu_ratio"] = round(
        math["service_cpu_ms_per_item"]["total"] / math["no_service"]["parallel_cpu_ms_per_item"],
        3,
    )
    report["math_cpu_ratio_vs_math_verify"] = round(
        math["service_cpu_ms_per_item"]["total"]
        / math["no_service"]["math_verify_cpu_ms_per_item"],
        3,
    )
    report["math_pool_busy_share"] = math["pool_busy_share"]
    if not args.skip_code:
        report["code"] = code = bench_code(args)
        report["code_cpu_ratio"] = round(
            code["service_cpu_ms_per_run"]["total"] / code["no_service"]["cpu_ms_per_run"], 3
        )
        report["code_slot_busy_share"] = code["slot_busy_share"]
    report["load_average_after"] = os.getloadavg()[0]
    print(json.dumps(report, indent=2))
    results.record(args.record or "scaling", report, tables(report), asked=args.record is not None)


def _kinds(per_item: dict[str, float]) -> str:
    return " / ".join(f"{per_item[kind]:.2f}" for kind in ("api", "worker_main", "pool", "redis"))


def tables(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The docs' tables: math (and code, when run) through the service against the same
    work with no service."""
    math = report["math"]
    out = [
        results.table(
            [
                "setup",
                "items/s (hardware's limit)",
                "CPU ms / item: service (no service)",
                "service by process: API / worker / pool / Redis",
                "ratio (target ≤ 1.25)",
                "verification processes busy (target ≥ 90 %)",
            ],
            [
                [
                    f"{math['setup']}, {math['items']:,} MATH-500 items",
                    f"{math['items_per_s']:,.0f} ({math['hardware_limit_items_per_s']:,.0f})",
                    f"{math['service_cpu_ms_per_item']['total']:.2f} "
                    f"({math['no_service']['parallel_cpu_ms_per_item']:.2f})",
                    _kinds(math["service_cpu_ms_per_item"]),
                    f"{report['math_cpu_ratio']:.2f}",
                    f"{100 * math['pool_busy_share']:.0f} %",
                ]
            ],
            title="Math",
        )
    ]
    if "code" in report:
        code = report["code"]
        out.append(
            results.table(
                [
                    "setup",
                    "runs/s (no service)",
                    "CPU ms / run: service (no service)",
                    "service by process: API / worker / sandboxes / Redis",
                    "ratio (target ≤ 1.3)",
                    "slot time kept busy",
                ],
                [
                    [
                        f"{code['setup']}, {code['runs']:,} runs",
                        f"{code['runs_per_s']:,.1f} ({code['no_service']['runs_per_s']:,.1f})",
                        f"{code['service_cpu_ms_per_run']['total']:.1f} "
                        f"({code['no_service']['cpu_ms_per_run']:.1f})",
                        _kinds(code["service_cpu_ms_per_run"]),
                        f"{report['code_cpu_ratio']:.2f}",
                        f"{100 * code['slot_busy_share']:.0f} %",
                    ]
                ],
                title="Sandboxed runs through `/v1/code/run`, one per request",
            )
        )
    return out


if __name__ == "__main__":
    main()
