"""Code service throughput over HTTP + Redis + worker processes, against a bare subprocess.

Run: ``python bench/code_throughput.py`` (prints one JSON object; about 2.5 minutes). It
starts its own redis-server, then, per setup (``WxS``: W worker processes with
``TRIBUNAL_CODE_SLOTS=S`` sandboxes each), the code API and its workers on free ports, with
the result cache off (``TRIBUNAL_CACHE_TTL_S=0``). Three measurements:

* ``run``: ``POST /v1/code/run`` of ``print(1)`` for each ``--run-setups`` entry: one request
  at a time back to back (latency p50/p99), ``--concurrency`` at a time (executions/s), and
  one at a time paced, a start every ``--pace-ms`` (an offered load below capacity, as tool
  calls arrive between generation steps: the sandbox started ahead of time is ready). Beside
  it the baseline, ``/usr/bin/python3 -I -S -c 'print(1)'`` (the sandbox's own interpreter, no
  isolation) as asyncio subprocesses of this process at the same concurrencies. Target: p50
  latency at most 2x the bare subprocess's; ratios at concurrency 1 (latency) and at
  ``--concurrency`` (throughput) are reported.
* ``leetcode``: test cases/s of the 228 LeetCodeDataset v0.3.1 test reference solutions
  through ``POST /v1/code/score`` (222 problems as function cases, 22,688 in all, and 6 as an
  assert ``check`` whose 546 asserts count as cases), every item in flight at once. Target:
  >= 300 cases/s. Each case may take 10 s, as in ``tests/code/test_datasets.py``.
* ``humaneval``: wall time to score the 164 HumanEval canonical solutions (assert tests),
  every item in flight at once. Target: < 10 s.

Two more parts, in this process (no HTTP, no Redis), for the hardening of issue #27:

* ``layers``: the same work with one layer (``--layer``: the seccomp filter, each stdio
  case's own namespaces, or each sandbox's memory cgroup) off and on, in alternating blocks
  (so that a change of the machine's load falls on both): ``print(1)`` runs one after
  another (sandboxed runs/s) and stdio items of ``--layers-cases`` cases each (cases/s: the
  filter is installed and the case's namespaces made once per case), with the CPU per run
  and per case of this process and every sandbox (reaped children, from ``getrusage``).
  Target: each layer within 5% of runs/s and CPU.
* ``beside``: an honest item's latency alone and while a hostile one (a 16 MiB reply the
  bytes cannot decide, against ``[1.5]``) is scored on the same verifier: the event-loop
  rule of issue #38, whose figure is the slowest honest item per round. Beside it, in
  ``compare``, that reply compared (bounded by what could match ``[1.5]``) and parsed and
  walked as before.
* ``compare``: the largest return value the output cap allows (``max_output_bytes`` of
  integers), as the service now takes it (``compare.reply_matches``: its bytes, beside its
  record, compared with the expected value's JSON), equal to the expected value and differing
  at its first integer; a tuple of the same integers (its bytes differ, so it is parsed and
  walked: the slowest path); and beside them the path it replaced (the whole record parsed,
  then walked). At the default cap and at the largest. And a reply of integers whose hashes
  all collide, through the walk and the decode before it. Target: an equal reply at the
  largest cap compared under 50 ms.

Items go out over ``--requests`` concurrent requests (dealt round-robin) rather than one
request each: the API's Redis pool holds 100 connections, and a few hundred sync requests that
wait together get 503s. Every reference solution passes, so each report gives the share
rewarded 1.0 (below 1 means a wrong or timed-out result, not a slow one) and the programs'
own time (sum of the tests' ``time_ms``). CPU of this client, the API, the workers and their
sandboxes (reaped children) is read from ``/proc`` around each measurement, beside the
1-minute load average before and after it: the machine's cores are shared with whatever else
runs on it, and every figure here moves with that load.

    .venv/bin/python bench/code_throughput.py
    .venv/bin/python bench/code_throughput.py --run-setups 1x1 --skip-score --runs 100
    .venv/bin/python bench/code_throughput.py --skip-run --score-setup 2x1 \\
        --env TRIBUNAL_WORKER_BATCH_SIZE=1 --env TRIBUNAL_WORKER_CONCURRENCY=4
    .venv/bin/python bench/code_throughput.py --skip-run --skip-score --layers-runs 200
    .venv/bin/python bench/code_throughput.py --skip-run --skip-score --layers-runs 200 \\
        --layer case_namespaces
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import contextlib
import json
import os
import resource
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import code_data, results, stats
from bench._stack import free_port, processes, redis_server, tribunal, wait_ready
from tribunal.client import ClientError, ItemResult, TribunalClient
from tribunal.code import CodeConfig, CodeItem, CodeRunVerifier, CodeVerifier, RunItem
from tribunal.code.codec import decode_value, encode_value
from tribunal.code.compare import expected_json, reply_matches, return_value_matches
from tribunal.code.protocol import dumps
from tribunal.wire import jsonparse

BARE = ["/usr/bin/python3", "-I", "-S", "-c", "print(1)"]
RUN_BODY = {"language": "python", "code": "print(1)"}
TARGET_LATENCY_RATIO = 2.0
TARGET_LEETCODE_CASES_PER_S = 300.0
TARGET_HUMANEVAL_S = 10.0
_TICK = os.sysconf("SC_CLK_TCK")


# -- measurement helpers ------------------------------------------------------------------


def _cpu_s(pids: Sequence[int]) -> dict[str, float]:
    """CPU seconds of ``pids`` themselves and of their reaped children (the sandboxes)."""
    own = children = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
        except OSError:
            continue
        # Fields after the command: state is [0]; utime, stime, cutime, cstime are [11:15].
        own += int(fields[11]) + int(fields[12])
        children += int(fields[13]) + int(fields[14])
    return {"own": own / _TICK, "children": children / _TICK}


class Meter:
    """Wall time, load average and CPU of the service's processes across one measurement."""

    def __init__(self, api: Sequence[int] = (), workers: Sequence[int] = ()) -> None:
        self.api, self.workers = list(api), list(workers)

    def __enter__(self) -> Meter:
        self.load_before = os.getloadavg()[0]
        self.cpu_api, self.cpu_workers = _cpu_s(self.api), _cpu_s(self.workers)
        self.cpu_self = time.process_time()
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.elapsed = time.perf_counter() - self.started
        self.load_after = os.getloadavg()[0]
        api, workers = _cpu_s(self.api), _cpu_s(self.workers)
        self.cpu = {
            "bench_client": time.process_time() - self.cpu_self,
            "api": api["own"] - self.cpu_api["own"],
            "workers": workers["own"] - self.cpu_workers["own"],
            "sandboxes": workers["children"] - self.cpu_workers["children"],
        }

    def report(self, per: int | None = None, unit: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {
            "load_avg_1m_before_after": [round(self.load_before, 2), round(self.load_after, 2)]
        }
        if per:
            out[f"cpu_ms_per_{unit}"] = {k: round(v * 1000 / per, 2) for k, v in self.cpu.items()}
        else:
            out["cpu_s"] = {k: round(v, 2) for k, v in self.cpu.items()}
        return out


async def _timed_loops(
    call: Callable[[], Awaitable[None]], n: int, concurrency: int
) -> tuple[float, list[float]]:
    """Run ``call`` ``n`` times with ``concurrency`` in flight; (elapsed s, sorted ms)."""
    latencies: list[float] = []
    remaining = n

    async def loop() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            t0 = time.perf_counter()
            await call()
            latencies.append((time.perf_counter() - t0) * 1000)

    started = time.perf_counter()
    await asyncio.gather(*(loop() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    latencies.sort()
    return elapsed, latencies


async def _paced(
    call: Callable[[], Awaitable[None]], n: int, pace_ms: float
) -> tuple[float, list[float]]:
    """Run ``call`` ``n`` times one at a time, starting one every ``pace_ms`` (an offered load
    below capacity, like tool calls that arrive between generation steps)."""
    latencies: list[float] = []
    started = time.perf_counter()
    for k in range(n):
        await asyncio.sleep(max(0.0, started + k * pace_ms / 1000 - time.perf_counter()))
        t0 = time.perf_counter()
        await call()
        latencies.append((time.perf_counter() - t0) * 1000)
    elapsed = time.perf_counter() - started
    latencies.sort()
    return elapsed, latencies


def _summary(elapsed: float, latencies: list[float], n: int) -> dict[str, float]:
    return {
        "per_s": round(n / elapsed, 1),
        "p50_ms": round(statistics.median(latencies), 2),
        "p99_ms": round(stats.percentile(latencies, 0.99), 2),
    }


# -- the bare subprocess baseline -----------------------------------------------------------


async def _bare_once() -> None:
    proc = await asyncio.create_subprocess_exec(
        *BARE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, _ = await proc.communicate()
    if proc.returncode != 0 or out != b"1\n":
        raise SystemExit(f"bare python3 failed: {proc.returncode} {out!r}")


async def bare(n: int, concurrency: int, pace_ms: float = 0) -> dict[str, Any]:
    """The baseline at ``concurrency`` (or one at a time, a start every ``pace_ms``)."""
    await _timed_loops(_bare_once, 10, concurrency)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    with Meter() as meter:
        if pace_ms:
            elapsed, latencies = await _paced(_bare_once, n, pace_ms)
        else:
            elapsed, latencies = await _timed_loops(_bare_once, n, concurrency)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    meter.cpu["python3_children"] = (
        after.ru_utime - children.ru_utime + after.ru_stime - children.ru_stime
    )
    for key in ("api", "workers", "sandboxes"):
        del meter.cpu[key]
    return {**_summary(elapsed, latencies, n), **meter.report(n, "run")}


# -- the service -----------------------------------------------------------------------------


class Stack:
    """The code API and ``workers`` worker processes of ``slots`` sandboxes each."""

    def __init__(self, redis_url: str, workers: int, slots: int, env: dict[str, str]) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.workers, self.slots = workers, slots
        self.env = {
            "TRIBUNAL_REDIS_URL": redis_url,
            "TRIBUNAL_QUEUE": "redis",
            "TRIBUNAL_KEY_PREFIX": f"bench-code-{uuid.uuid4().hex[:8]}",
            "TRIBUNAL_CODE_SLOTS": str(slots),
            "TRIBUNAL_CACHE_TTL_S": "0",
            "TRIBUNAL_LOG_LEVEL": "WARNING",
            **env,
        }

    def argvs(self) -> list[list[str]]:
        api = tribunal("api", "code", "--port", str(self.port))
        return [api, *(tribunal("worker", "code", "--workers", "1") for _ in range(self.workers))]

    def settings(self) -> dict[str, Any]:
        keys = ("TRIBUNAL_CODE_SLOTS", "TRIBUNAL_WORKER_CONCURRENCY", "TRIBUNAL_WORKER_BATCH_SIZE")
        return {"workers": self.workers, **{k: self.env.get(k, "default") for k in keys}}


async def _wait_workers(client: TribunalClient) -> None:
    """Until a run answers (the workers have started their sandboxes and probed them)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with contextlib.suppress(ClientError):
            if (await client.run_code(RUN_BODY)).stdout == "1\n":
                return
        await asyncio.sleep(0.2)
    raise SystemExit("the code workers did not answer within 60 s")


async def service_run(
    stack: Stack, pids: tuple[list[int], list[int]], n: int, concurrency: int, pace_ms: float
) -> dict[str, Any]:
    """/v1/code/run of print(1) at concurrency 1 (latency), at ``concurrency`` (execs/s) and
    one at a time every ``pace_ms``."""
    async with TribunalClient(
        stack.base_url, max_concurrency=concurrency + 2, timeout=120, max_retries=0
    ) as client:

        async def once() -> None:
            run = await client.run_code(RUN_BODY)
            if run.stdout != "1\n" or run.verdict != "accepted":
                raise SystemExit(f"/v1/code/run answered {run}")

        await _wait_workers(client)
        await _timed_loops(once, 4 * stack.workers * stack.slots + 10, concurrency)  # warm-up
        out: dict[str, Any] = {}
        for c in (1, concurrency):
            with Meter(*pids) as meter:
                elapsed, latencies = await _timed_loops(once, n, c)
            out[f"concurrency_{c}"] = {**_summary(elapsed, latencies, n), **meter.report(n, "run")}
        if pace_ms:
            with Meter(*pids) as meter:
                elapsed, latencies = await _paced(once, n, pace_ms)
            out[f"paced_{pace_ms:g}ms"] = {
                **_summary(elapsed, latencies, n),
                **meter.report(n, "run"),
            }
    return out


async def score_all(
    stack: Stack, pids: tuple[list[int], list[int]], items: list[dict[str, Any]], requests: int
) -> tuple[Meter, list[ItemResult]]:
    """Every item in flight at once, spread round-robin over ``requests`` concurrent
    ``POST /v1/code/score`` (the API's Redis pool holds 100 connections: far more concurrent
    requests than that get 503s)."""
    chunks = [items[k::requests] for k in range(min(requests, len(items)))]
    async with TribunalClient(
        stack.base_url, max_concurrency=len(chunks) + 2, timeout=600, max_retries=0
    ) as client:
        await _wait_workers(client)
        with Meter(*pids) as meter:
            answers = await asyncio.gather(*(client.score("code", chunk) for chunk in chunks))
    return meter, [result for answer in answers for result in answer]


def _failures(results: list[ItemResult]) -> list[str]:
    return [r.id for r in results if r.reward != 1.0]


def _program_s(results: list[ItemResult]) -> float:
    """Seconds the programs themselves ran: the sum of every test's ``time_ms`` (a function
    call's own time; an assert item's whole check, relay included)."""
    return (
        sum(test.get("time_ms") or 0.0 for r in results for test in r.details.get("tests", []))
        / 1000
    )


def _assert_count(test: str) -> int:
    module = code_data.parse(test)
    check = next(n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "check")
    return sum(isinstance(s, ast.Assert) for s in ast.walk(check))


async def leetcode(
    stack: Stack, pids: tuple[list[int], list[int]], limit: int, timeout_s: float, requests: int
) -> dict[str, Any]:
    items, _ = code_data.leetcode()
    items = [{**item, "limits": {"timeout_s": timeout_s}} for item in items[: limit or None]]
    cases = sum(len(i["tests"]["cases"]) if i["tests"]["kind"] == "function" else 0 for i in items)
    asserts = sum(
        _assert_count(i["tests"]["test"]) if i["tests"]["kind"] == "assert" else 0 for i in items
    )
    meter, results = await score_all(stack, pids, items, requests)
    failed = _failures(results)
    return {
        "problems": len(items),
        "function_cases": cases,
        "assert_items": sum(i["tests"]["kind"] == "assert" for i in items),
        "asserts_in_assert_items": asserts,
        "timeout_s_per_case": timeout_s,
        "wall_s": round(meter.elapsed, 2),
        "cases_per_s": round((cases + asserts) / meter.elapsed, 1),
        "target_cases_per_s": TARGET_LEETCODE_CASES_PER_S,
        "meets_target": (cases + asserts) / meter.elapsed >= TARGET_LEETCODE_CASES_PER_S,
        "items_per_s": round(len(items) / meter.elapsed, 1),
        "program_time_s": round(_program_s(results), 2),
        "share_rewarded": round(1 - len(failed) / len(items), 4),
        "not_rewarded": failed,
        **meter.report(),
    }


async def humaneval(
    stack: Stack, pids: tuple[list[int], list[int]], requests: int, limit: int = 0
) -> dict[str, Any]:
    items = code_data.humaneval()[: limit or None]
    meter, results = await score_all(stack, pids, items, requests)
    failed = _failures(results)
    return {
        "items": len(items),
        "wall_s": round(meter.elapsed, 2),
        "target_wall_s": TARGET_HUMANEVAL_S,
        "meets_target": meter.elapsed < TARGET_HUMANEVAL_S,
        "items_per_s": round(len(items) / meter.elapsed, 1),
        "program_time_s": round(_program_s(results), 2),
        "share_rewarded": round(1 - len(failed) / len(items), 4),
        "not_rewarded": failed,
        **meter.report(len(items), "item"),
    }


def _setup(text: str) -> tuple[int, int]:
    workers, _, slots = text.partition("x")
    return int(workers), int(slots)


def _env(pairs: Sequence[str]) -> dict[str, str]:
    return dict(pair.split("=", 1) for pair in pairs)


async def _layer_block(layer: str, on: bool, runs: int, cases: int) -> dict[str, float]:
    """``runs`` sandboxed runs of ``print(1)``, then ``runs // 10`` stdio items of ``cases``
    cases, one at a time, with ``layer`` on or off (the others on): wall and CPU of each
    (verifiers closed, so every sandbox is reaped and counted). Without ``case_namespaces``,
    the cases of an item share the sandbox's namespaces, and without ``memory_cgroup`` the
    sandboxes run in the service's cgroup (as where the host refuses them)."""
    config = CodeConfig(slots=1, seccomp=on or layer != "seccomp")
    out: dict[str, float] = {}
    runner = CodeRunVerifier(config)
    await runner.start()
    _set_layer(runner, layer, on)
    cpu, start = stats.cpu_s(), time.perf_counter()
    for k in range(runs):
        [outcome] = await runner.score([RunItem(id=str(k), **RUN_BODY)])
        assert outcome.error is None and outcome.details["stdout"] == "1\n", outcome
    out["run_wall_s"] = time.perf_counter() - start
    await runner.aclose()
    out["run_cpu_s"] = stats.cpu_s() - cpu
    scorer = CodeVerifier(config)
    await scorer.start()
    _set_layer(scorer, layer, on)
    tests = {"kind": "stdio", "cases": [{"stdin": f"{k} 1\n", "stdout": str(k + 1)}
                                        for k in range(cases)]}  # fmt: skip
    program = "a, b = map(int, input().split())\nprint(a + b)"
    cpu, start = stats.cpu_s(), time.perf_counter()
    for k in range(max(1, runs // 10)):
        item = CodeItem(id=str(k), language="python", code=program, tests=tests)
        [outcome] = await scorer.score([item])
        assert outcome.error is None and outcome.reward == 1.0, outcome
    out["case_wall_s"] = time.perf_counter() - start
    await scorer.aclose()
    out["case_cpu_s"] = stats.cpu_s() - cpu
    return out


def _set_layer(verifier: CodeRunVerifier | CodeVerifier, layer: str, on: bool) -> None:
    """Turn a layer the start-up probe found off, as on a host that refuses it (the spare
    sandbox started with the verifier keeps it: one item of each block)."""
    runner = verifier._runner
    assert runner is not None and verifier.case_namespaces
    if layer == "case_namespaces":
        runner.case_namespaces = on
    elif layer == "memory_cgroup":
        assert verifier.layers["memory_cgroup"], "no memory cgroup on this host"
        if not on:
            runner.cgroups = None


async def layers(runs: int, cases: int, rounds: int = 2, layer: str = "seccomp") -> dict[str, Any]:
    """One layer (``seccomp``, ``case_namespaces`` or ``memory_cgroup``; the others on) off
    and on, ``rounds`` alternating blocks each."""
    sums = {name: dict.fromkeys(("run_wall_s", "run_cpu_s", "case_wall_s", "case_cpu_s"), 0.0)
            for name in (f"{layer}_off", f"{layer}_on")}  # fmt: skip
    per_block = max(1, runs // rounds)
    for _ in range(rounds):
        for name in sums:
            block = await _layer_block(layer, name.endswith("_on"), per_block, cases)
            for key, value in block.items():
                sums[name][key] += value
    n_runs = per_block * rounds
    n_cases = max(1, per_block // 10) * cases * rounds
    out: dict[str, Any] = {
        "layer": layer, "runs": n_runs, "cases": n_cases, "cases_per_item": cases
    }  # fmt: skip
    for name, s in sums.items():
        out[name] = {
            "runs_per_s": round(n_runs / s["run_wall_s"], 1),
            "cpu_ms_per_run": round(1000 * s["run_cpu_s"] / n_runs, 2),
            "cases_per_s": round(n_cases / s["case_wall_s"], 1),
            "cpu_ms_per_case": round(1000 * s["case_cpu_s"] / n_cases, 2),
        }
    off, on = out[f"{layer}_off"], out[f"{layer}_on"]
    out["on_vs_off"] = {key: round(on[key] / off[key], 3) for key in off}
    return out


def _median_ms(fn: Callable[[], object], repeats: int = 5) -> float:
    """Median CPU time of ``fn`` in this process (ms): on a shared machine the wall clock
    measures the neighbours too, and the work is all on this thread."""
    times = []
    for _ in range(repeats):
        start = time.process_time()
        fn()
        times.append(1000 * (time.process_time() - start))
    return round(statistics.median(times), 2)


def _reply_costs(cap: int) -> dict[str, Any]:
    """A return value of integers filling ``cap`` bytes, as the driver sends it (its JSON,
    beside its record), compared as the service compares it; and as it was before (inside its
    record: the whole record parsed, then walked)."""
    value = list(range(10**6, 10**6 + cap // 8))  # "1000000," is 8 bytes
    reply = dumps(encode_value(value)).encode()
    as_tuple = dumps(encode_value(tuple(value))).encode()
    wrong = [0, *value[1:]]
    record = {"i": 0, "status": "ok", "value": encode_value(value), "time_ms": 1.0}
    line = json.dumps(record, separators=(",", ":")).encode()
    parsed = jsonparse.loads(line)["value"]
    return {
        "reply_bytes": len(reply),
        "integers": len(value),
        "equal_ms": _median_ms(lambda: reply_matches(value, reply)),
        "of_which_expected_json_ms": _median_ms(lambda: expected_json(value, len(reply))),
        "first_differs_ms": _median_ms(lambda: reply_matches(wrong, reply)),
        "tuple_parsed_and_walked_ms": _median_ms(lambda: reply_matches(value, as_tuple)),
        "before_record_parse_ms": _median_ms(lambda: jsonparse.loads(line)),
        "before_walk_equal_ms": _median_ms(lambda: return_value_matches(value, parsed)),
        "before_walk_first_differs_ms": _median_ms(lambda: return_value_matches(wrong, parsed)),
    }


def _hostile_value(cap: int) -> list[dict[str, int]]:
    """A return value of about ``cap`` bytes that the bytes cannot decide against ``[1.5]``
    (dicts, so no byte rule applies) and that only the exact JSON parser reads (integers past
    64 bits): the slowest parse a program can ask of the service."""
    return [{"k": 10**20}] * (cap // 44)  # {"$dict":[["k",100000000000000000000]]}, is 44


def compare_part() -> dict[str, Any]:
    """Replies at the default output cap and at the largest an item may ask for, by their
    bytes and by the path they replaced; a reply at the largest cap that the bytes cannot
    decide against a small expected value, bounded by what could match it and parsed as
    before; and a set of integers of one hash, by the walk and by the decode before it."""
    config = CodeConfig()
    colliding = 20_000  # the decode is quadratic: a whole reply of these takes minutes
    hostile = {"v": {"$set": [k * (2**61 - 1) for k in range(colliding)]}, "o": []}
    undecided = dumps(encode_value(_hostile_value(config.max_output_bytes))).encode()
    return {
        "hostile_reply": {
            "reply_bytes": len(undecided),
            "expected": "[1.5]",
            "compared_ms": _median_ms(lambda: reply_matches([1.5], undecided), repeats=3),
            "before_parsed_and_walked_ms": _median_ms(
                lambda: return_value_matches([1.5], jsonparse.loads(undecided)), repeats=3
            ),
        },
        "default_cap": {
            "max_output_bytes": config.default_max_output_bytes,
            **_reply_costs(config.default_max_output_bytes),
        },
        "largest_cap": {
            "max_output_bytes": config.max_output_bytes,
            **_reply_costs(config.max_output_bytes),
        },
        "colliding_set": {
            "integers": colliding,
            "walk_ms": _median_ms(lambda: return_value_matches([1], hostile)),
            "decode_ms": _median_ms(lambda: decode_value(hostile), repeats=1),
        },
        "target_ms": 50,
    }


async def beside(rounds: int) -> dict[str, Any]:
    """An honest function item's latency alone, and while a hostile one is scored on the same
    verifier (two slots): the hostile item returns a reply at the largest output cap that the
    bytes cannot decide (:func:`_hostile_value`); honest items are scored one after another
    for as long as it is in flight, and the slowest of them is its round's figure. Work the
    hostile item puts on the event loop is added to whichever honest item overlaps it."""
    cap = CodeConfig().max_output_bytes
    one_call = {"kind": "function", "entry_point": "f", "cases": [{"expected": [1.5]}]}
    honest = CodeItem(
        id="honest", language="python", code="def f():\n    return [1.5]\n", tests=one_call
    )
    hostile = CodeItem(
        id="hostile",
        language="python",
        code=f"def f():\n    return [{{'k': 10**20}}] * {cap // 44}\n",
        tests=one_call,
        limits={"timeout_s": 60.0, "max_output_bytes": cap, "memory_mb": 1024},
    )
    verifier = CodeVerifier(CodeConfig(slots=2))
    await verifier.start()

    async def honest_ms() -> float:
        start = time.perf_counter()
        [outcome] = await verifier.score([honest])
        assert outcome.reward == 1.0, outcome
        return 1000 * (time.perf_counter() - start)

    try:
        alone = sorted([await honest_ms() for _ in range(10)])
        worst, counts = [], []
        for _ in range(rounds):
            task = asyncio.create_task(verifier.score([hostile]))
            latencies = []
            while not task.done():
                latencies.append(await honest_ms())
            [outcome] = task.result()
            assert outcome.error is None and outcome.reward == 0.0, outcome
            worst.append(round(max(latencies), 1))
            counts.append(len(latencies))
    finally:
        await verifier.aclose()
    return {
        "honest_alone_ms_p50": round(statistics.median(alone), 1),
        "honest_alone_ms_max": round(alone[-1], 1),
        "honest_beside_hostile_ms_max_per_round": worst,
        "honest_items_per_round": counts,
        "hostile_reply_bytes": len(dumps(encode_value(_hostile_value(cap)))),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=300, help="Runs per /v1/code/run series.")
    parser.add_argument("--concurrency", type=int, default=2, help="Runs in flight (throughput).")
    parser.add_argument(
        "--pace-ms", type=float, default=50, help="Start a paced run every N ms (0: skip)."
    )
    parser.add_argument(
        "--run-setups",
        default="1x1,1x2,2x1",
        help="Comma-separated WORKERSxSLOTS setups for /v1/code/run.",
    )
    parser.add_argument("--score-setup", default="1x2", help="WORKERSxSLOTS for scoring.")
    parser.add_argument(
        "--leetcode-limit", type=int, default=0, help="Score only the first N problems (0: all)."
    )
    parser.add_argument(
        "--leetcode-timeout-s",
        type=float,
        default=10.0,
        help="Per-case limit of LeetCode items (as tests/code/test_datasets.py: a few "
        "reference solutions need 3+ s on a loaded 2-core machine).",
    )
    parser.add_argument(
        "--requests",
        type=int,
        default=32,
        help="Concurrent /v1/code/score requests the items are dealt over (at most ~90).",
    )
    parser.add_argument("--skip-run", action="store_true", help="Skip the /v1/code/run part.")
    parser.add_argument("--skip-score", action="store_true", help="Skip LeetCode and HumanEval.")
    parser.add_argument(
        "--humaneval-limit", type=int, default=0, help="Score only the first N items (0: all)."
    )
    parser.add_argument(
        "--skip-compare",
        action="store_true",
        help="Skip the reply comparison (its quadratic 'before' path takes tens of seconds).",
    )
    parser.add_argument(
        "--layers-runs",
        type=int,
        default=200,
        help="Runs per setting of the seccomp comparison (0: skip it); items of "
        "--layers-cases cases, a tenth as many.",
    )
    parser.add_argument("--layers-cases", type=int, default=10, help="Cases per stdio item.")
    parser.add_argument(
        "--layer",
        choices=("seccomp", "case_namespaces", "memory_cgroup"),
        default="seccomp",
        help="The layer the layers part turns off and on (the other one stays on).",
    )
    parser.add_argument(
        "--beside-rounds",
        type=int,
        default=3,
        help="Rounds of honest items scored beside a hostile one (0: skip that part).",
    )
    parser.add_argument(
        "--env", action="append", default=[], help="Extra KEY=VALUE for the service (repeatable)."
    )
    results.add_record_argument(parser)
    args = parser.parse_args()
    report: dict[str, Any] = {
        "command": " ".join(["python bench/code_throughput.py", *sys.argv[1:]]),
        "cores": os.cpu_count(),
        "load_avg_1m_5m_15m_at_start": stats.load_avg(),
        "settings": {
            "runs_per_series": args.runs,
            "throughput_concurrency": args.concurrency,
            "pace_ms": args.pace_ms,
            "run_setups": args.run_setups.split(","),
            "score_setup": args.score_setup,
            "score_requests": args.requests,
            "leetcode_problems": args.leetcode_limit or "all",
            "service_env": {
                "TRIBUNAL_QUEUE": "redis",
                "TRIBUNAL_CACHE_TTL_S": "0",
                "TRIBUNAL_LOG_LEVEL": "WARNING",
                **_env(args.env),
            },
        },
    }
    extra_env = _env(args.env)
    if not args.skip_compare:
        report["compare"] = compare_part()
    if args.beside_rounds:
        report["beside"] = asyncio.run(beside(args.beside_rounds))
    if args.layers_runs:
        report["layers"] = asyncio.run(
            layers(args.layers_runs, args.layers_cases, layer=args.layer)
        )
    with redis_server() as redis_url:
        if not args.skip_run:
            report["run"] = _run_part(redis_url, args, extra_env)
        if not args.skip_score:
            workers, slots = _setup(args.score_setup)
            stack = Stack(redis_url, workers, slots, extra_env)
            with processes(stack.argvs(), stack.env) as started:
                wait_ready(stack.base_url)
                pids = ([started[0].pid], [p.pid for p in started[1:]])
                report["score_settings"] = {
                    **stack.settings(),
                    "client": f"every item in flight at once, over {args.requests} concurrent "
                    "POST /v1/code/score (items dealt round-robin)",
                }
                report["leetcode"] = asyncio.run(
                    leetcode(
                        stack, pids, args.leetcode_limit, args.leetcode_timeout_s, args.requests
                    )
                )
                report["humaneval"] = asyncio.run(
                    humaneval(stack, pids, args.requests, args.humaneval_limit)
                )
    report["load_avg_1m_5m_15m_at_end"] = stats.load_avg()
    report["targets"] = _targets(report)
    print(json.dumps(report, indent=2))
    results.record(
        args.record or "code_throughput", report, tables(report), asked=args.record is not None
    )


def tables(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The docs' tables, of the parts this run made: ``/v1/code/run`` per setup beside the
    bare subprocess, the datasets scored, the layer off and on, the largest replies."""
    out = []
    if "run" in report:
        out.append(_run_table(report["run"]))
    if "leetcode" in report:
        leet, human = report["leetcode"], report["humaneval"]
        cases = leet["function_cases"] + leet["asserts_in_assert_items"]
        out.append(
            results.table(
                ["dataset", "items", "cases", "wall s", "cases/s", "rewarded 1.0"],
                [
                    [
                        "LeetCodeDataset v0.3.1 test",
                        leet["problems"],
                        f"{cases:,}",
                        f"{leet['wall_s']:.1f}",
                        f"{leet['cases_per_s']:,.0f} (target ≥ 300)",
                        f"{100 * leet['share_rewarded']:.1f} %",
                    ],
                    [
                        "HumanEval",
                        human["items"],
                        "",
                        f"{human['wall_s']:.1f} (target < 10)",
                        "",
                        f"{100 * human['share_rewarded']:.1f} %",
                    ],
                ],
                title="`POST /v1/code/score`",
            )
        )
    if "layers" in report:
        layers = report["layers"]
        name = layers["layer"]
        keys = ("runs_per_s", "cpu_ms_per_run", "cases_per_s", "cpu_ms_per_case")
        out.append(
            results.table(
                ["setting", "runs/s", "CPU ms per run", "cases/s", "CPU ms per case"],
                [
                    [f"{name} off", *(layers[f"{name}_off"][k] for k in keys)],
                    [f"{name} on", *(layers[f"{name}_on"][k] for k in keys)],
                    ["on / off", *(layers["on_vs_off"][k] for k in keys)],
                ],
                title=f"One layer off and on, in process ({layers['runs']} runs, "
                f"{layers['cases']} cases per setting)",
            )
        )
    if "compare" in report:
        compare = report["compare"]
        caps = (("default_cap", "the default cap"), ("largest_cap", "the largest cap"))
        out.append(
            results.table(
                [
                    "reply",
                    "equal, ms (of which the expected JSON)",
                    "first integer differs, ms",
                    "a tuple (parsed and walked), ms",
                    "before: record parsed, then walked (equal), ms",
                ],
                [
                    [
                        f"{compare[cap]['max_output_bytes'] // 2**20} MiB ({label}), "
                        f"{compare[cap]['integers']:,} integers",
                        f"{compare[cap]['equal_ms']} ({compare[cap]['of_which_expected_json_ms']})",
                        compare[cap]["first_differs_ms"],
                        compare[cap]["tuple_parsed_and_walked_ms"],
                        round(
                            compare[cap]["before_record_parse_ms"]
                            + compare[cap]["before_walk_equal_ms"],
                            2,
                        ),
                    ]
                    for cap, label in caps
                ],
                title="The largest return values, compared by their bytes (target: an equal "
                f"reply under {compare['target_ms']} ms)",
            )
        )
    if "beside" in report and "compare" in report:
        near = report["beside"]
        hostile = report["compare"]["hostile_reply"]
        out.append(
            results.table(
                ["", "ms"],
                [
                    ["honest item alone, p50", near["honest_alone_ms_p50"]],
                    ["honest item alone, slowest of 10", near["honest_alone_ms_max"]],
                    [
                        "slowest honest item beside a hostile one, per round",
                        ", ".join(map(str, near["honest_beside_hostile_ms_max_per_round"])),
                    ],
                    ["the hostile reply compared (CPU)", hostile["compared_ms"]],
                    ["before: parsed and walked (CPU)", hostile["before_parsed_and_walked_ms"]],
                ],
                title=f"An honest item beside a hostile one ({hostile['reply_bytes'] / 2**20:.0f}"
                " MiB reply the bytes cannot decide, against `[1.5]`), one verifier of 2 slots",
            )
        )
    return out


def _run_table(run: dict[str, Any]) -> dict[str, Any]:
    """``/v1/code/run`` of ``print(1)``: each series of the bare subprocess, then of each
    setup with its ratio to the bare figure (p50 one at a time and paced, runs/s at the
    higher concurrency)."""
    bare, rows = run["bare_subprocess"], []
    series = [key for key in bare if key.startswith(("concurrency_", "paced_"))]

    def described(key: str) -> str:
        if key == "concurrency_1":
            return "one at a time"
        if key.startswith("paced_"):
            return f"one every {key.removeprefix('paced_').removesuffix('ms')} ms"
        return f"{key.removeprefix('concurrency_')} at a time"

    def figures(result: dict[str, Any]) -> list[str]:
        return [f"{result['p50_ms']:.1f}", f"{result['p99_ms']:.1f}", f"{result['per_s']:,.1f}"]

    for key in series:
        rows.append([f"bare subprocess, {described(key)}", *figures(bare[key]), ""])
    for name, setup in run["setups"].items():
        for key in series:
            ratios = setup["vs_bare"]
            if key == "concurrency_1":
                ratio = f"p50 {ratios['latency_ratio_p50_c1']:.2f}×"
            elif key.startswith("paced_"):
                ratio = f"p50 {ratios[f'latency_ratio_p50_{key}']:.2f}×"
            else:
                concurrency = key.removeprefix("concurrency_")
                ratio = f"runs/s {ratios[f'throughput_ratio_c{concurrency}']:.2f}×"
            rows.append([f"service {name}, {described(key)}", *figures(setup[key]), ratio])
    return results.table(
        ["run of print(1)", "p50 ms", "p99 ms", "runs/s", "against the bare subprocess"],
        rows,
        title="`POST /v1/code/run` (setups: workers × sandbox slots)",
    )


def _run_part(redis_url: str, args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    """The bare baseline, then /v1/code/run per setup, and their ratios."""
    c = args.concurrency
    base: dict[str, Any] = {
        "argv": BARE,
        "concurrency_1": asyncio.run(bare(args.runs, 1)),
        f"concurrency_{c}": asyncio.run(bare(args.runs, c)),
    }
    paced = f"paced_{args.pace_ms:g}ms"
    if args.pace_ms:
        base[paced] = asyncio.run(bare(args.runs, 1, args.pace_ms))
    runs: dict[str, Any] = {}
    for text in args.run_setups.split(","):
        workers, slots = _setup(text)
        stack = Stack(redis_url, workers, slots, env)
        with processes(stack.argvs(), stack.env) as started:
            wait_ready(stack.base_url)
            pids = ([started[0].pid], [p.pid for p in started[1:]])
            result = asyncio.run(service_run(stack, pids, args.runs, c, args.pace_ms))
        ratios = {
            "latency_ratio_p50_c1": _ratio(result, base, "concurrency_1", "p50_ms"),
            f"throughput_ratio_c{c}": _ratio(result, base, f"concurrency_{c}", "per_s"),
        }
        if args.pace_ms:
            ratios[f"latency_ratio_p50_{paced}"] = _ratio(result, base, paced, "p50_ms")
        runs[text] = {"settings": stack.settings(), **result, "vs_bare": ratios}
    best = max(runs, key=lambda name: runs[name][f"concurrency_{c}"]["per_s"])
    lowest = min(runs, key=lambda name: runs[name]["concurrency_1"]["p50_ms"])
    out = {
        "program": RUN_BODY,
        "bare_subprocess": base,
        "setups": runs,
        "best_throughput_setup": best,
        "lowest_latency_setup": lowest,
        "target_latency_ratio": TARGET_LATENCY_RATIO,
        "meets_latency_target_c1": runs[lowest]["vs_bare"]["latency_ratio_p50_c1"]
        <= TARGET_LATENCY_RATIO,
    }
    if args.pace_ms:
        lowest_paced = min(runs, key=lambda name: runs[name][paced]["p50_ms"])
        out[f"meets_latency_target_{paced}"] = (
            runs[lowest_paced]["vs_bare"][f"latency_ratio_p50_{paced}"] <= TARGET_LATENCY_RATIO
        )
    return out


def _targets(report: dict[str, Any]) -> dict[str, Any]:
    """Each target and whether this run met it."""
    out: dict[str, Any] = {}
    if "run" in report:
        out["run_p50_latency_at_most_2x_bare_c1"] = report["run"]["meets_latency_target_c1"]
        for key, value in report["run"].items():
            if key.startswith("meets_latency_target_paced"):
                out["run_p50_latency_at_most_2x_bare_" + key.rpartition("_target_")[2]] = value
    if "leetcode" in report:
        out["leetcode_at_least_300_cases_per_s"] = report["leetcode"]["meets_target"]
    if "humaneval" in report:
        out["humaneval_under_10_s"] = report["humaneval"]["meets_target"]
    if "compare" in report:
        for cap in ("default_cap", "largest_cap"):
            costs = report["compare"][cap]
            out[f"{cap}_equal_reply_compared_under_50_ms"] = (
                costs["equal_ms"] < report["compare"]["target_ms"]
            )
    if "layers" in report:
        ratios = report["layers"]["on_vs_off"]
        out[f"{report['layers']['layer']}_within_5_percent"] = (
            min(ratios["runs_per_s"], ratios["cases_per_s"]) >= 0.95
            and max(ratios["cpu_ms_per_run"], ratios["cpu_ms_per_case"]) <= 1.05
        )
    return out


def _ratio(result: dict[str, Any], base: dict[str, Any], series: str, key: str) -> float:
    return round(float(result[series][key]) / float(base[series][key]), 2)


if __name__ == "__main__":
    main()
