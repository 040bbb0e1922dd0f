"""Load on the whole stack: many concurrent clients (locust users) for a bounded time across the
gateway and the four verifiers, on 127.0.0.1 only.

The stack is the one ``tribunal.testing.stack.start_full_stack`` starts (an API and a worker
per service on one throwaway Redis); the judge's model is the scripted OpenAI-compatible
server (``tribunal.llm.testing.fake_openai``, 50 ms a call, as a process of its own), the
citation scorer runs its lexical mode. Each locust user sends one item at a time,
synchronously, with a think time of 0.5 to 1.5 s: a math item to the gateway's ``rloo_math``
spec or straight to math, a judge item, a citation item or a small program to the code
runner, each with a fresh random number so that the result cache does not answer it.

Prints one JSON object: requests, throughput, latency p50/p99 (ms, all requests and per
endpoint), responses by status, the RSS of every process (and its children) after the
warm-up and at the end, and two figures: ``errors_other_than_429`` (every answer but 200 and
429, every 429 without ``Retry-After``, and every connection error: target 0) and
``rss_growth_max_pct`` (the largest RSS growth of any process from after warm-up to the end:
target <= 10).

    python bench/load.py --users 1000 --duration 60
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import results
from bench._stack import fake_judge_argv
from tribunal.testing import stack

CITED = "<answer><cite id=S1>The Eiffel Tower is {n} metres tall.</cite></answer>"
EVIDENCE = {"S1": "The Eiffel Tower is 330 metres tall.", "S2": "Bananas are yellow."}
ADD_TESTS = {"kind": "function", "entry_point": "add", "cases": [{"args": [2, 3], "expected": 5}]}


def bodies(n: int) -> dict[str, tuple[str, dict[str, Any]]]:
    """One request per endpoint: (service, path and body), numbered ``n``."""
    math = {"id": "m", "response": f"The answer is \\boxed{{{n}}}.", "ground_truth": str(n)}
    judge = {
        "id": "j",
        "question": "How tall is the Eiffel Tower?",
        "response": f"It is {n} metres tall.",
        "positive_rubrics": ["Gives the height in metres"],
        "rubric_sets": [],
    }
    code = f"def add(a, b):\n    return a + b + {n % 2}\n"
    citation = {"id": "c", "response": CITED.format(n=n), "evidence": EVIDENCE}
    return {
        "gateway": ("gateway", {"items": [{**math, "spec": "rloo_math"}]}),
        "math": ("math", {"items": [math]}),
        "judge": ("judge", {"items": [judge]}),
        "citation": ("citation", {"items": [citation]}),
        "code": (
            "code",
            {"items": [{"id": "k", "language": "python", "code": code, "tests": ADD_TESTS}]},
        ),
    }


PATHS = {
    "gateway": "/v1/score",
    "math": "/v1/math/score",
    "judge": "/v1/judge/score",
    "citation": "/v1/citation/score",
    "code": "/v1/code/score",
}
WEIGHTS = {"gateway": 4, "math": 3, "judge": 1, "citation": 1, "code": 1}


def rss_by_process(processes: dict[str, subprocess.Popen[bytes]]) -> dict[str, int]:
    """RSS in bytes of each process with its children (pools, sandboxes), by label."""
    out = {}
    for label, process in processes.items():
        try:
            parent = psutil.Process(process.pid)
            family = [parent, *parent.children(recursive=True)]
            out[label] = sum(p.memory_info().rss for p in family if p.is_running())
        except psutil.Error:
            out[label] = 0
    return out


def run_load(urls: dict[str, str], users: int, duration_s: float, warmup_s: float) -> Any:
    """Run ``users`` locust users for ``warmup_s`` + ``duration_s``; return the locust
    environment, the statuses seen after the warm-up, and a callback's RSS snapshots."""
    import gevent
    from locust import FastHttpUser, between, events, task
    from locust.env import Environment

    statuses: Counter[str] = Counter()
    counting = {"on": False}

    @events.request.add_listener
    def _count(response: Any, exception: Any, name: str = "", **_: Any) -> None:
        if not counting["on"]:
            return
        status = getattr(response, "status_code", 0) or 0
        if exception is not None and status in (0, None):
            statuses["connection_error"] += 1
            # Which endpoint, and what the load tool saw (a timeout, a reset, a refusal).
            statuses[f"connection_error {name}: {type(exception).__name__}"] += 1
        elif status == 429 and not response.headers.get("Retry-After"):
            statuses["429_without_retry_after"] += 1
        else:
            statuses[str(status)] += 1

    names = list(WEIGHTS)
    weights = [WEIGHTS[n] for n in names]

    class StackUser(FastHttpUser):
        host = urls["gateway"]
        wait_time = between(0.5, 1.5)
        network_timeout = 60.0
        connection_timeout = 10.0

        @task
        def one_item(self) -> None:
            name = random.choices(names, weights)[0]
            service, body = bodies(random.randrange(10**9))[name]
            url = urls[service] + PATHS[name]
            with self.client.post(url, json=body, name=name, catch_response=True) as answer:
                if answer.status_code in (200, 429):
                    answer.success()  # 429 is load shedding, counted apart

    env = Environment(user_classes=[StackUser], events=events)
    runner = env.create_local_runner()
    runner.start(users, spawn_rate=max(users / max(warmup_s, 1.0), 1.0))
    gevent.sleep(warmup_s)
    env.stats.reset_all()
    counting["on"] = True
    return env, runner, statuses, gevent


def main() -> None:
    """Command line: start the stack, run the load, print one JSON object."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=1000, help="Concurrent clients (<= 2000).")
    parser.add_argument("--duration", type=float, default=60.0, help="Measured seconds (<= 600).")
    parser.add_argument("--warmup", type=float, default=15.0, help="Ramp-up seconds, unmeasured.")
    args = parser.parse_args()
    if not (1 <= args.users <= 2000 and 0 < args.duration <= 600 and 0 <= args.warmup <= 120):
        parser.error("bounded: --users 1..2000, --duration 0..600 s, --warmup 0..120 s")
    with tempfile.TemporaryDirectory(prefix="tribunal-load-") as tmp, stack.redis_server() as redis:
        judge_port = stack.free_port()
        judge = stack.start_process(fake_judge_argv(judge_port, 50, 256), {})
        try:
            stack.wait_ready(f"http://127.0.0.1:{judge_port}", 30, {"judge": judge}, "/stats")
            full = stack.start_full_stack(
                redis.url,
                env={"TRIBUNAL_KEY_PREFIX": f"load{judge_port}", "TRIBUNAL_LOG_LEVEL": "WARNING"},
                service_env={
                    "judge": {
                        "TRIBUNAL_JUDGE_BASE_URL": f"http://127.0.0.1:{judge_port}/v1",
                        "TRIBUNAL_JUDGE_MODEL": "fake-judge",
                    }
                },
                log_dir=Path(tmp),
            )
        except BaseException:
            stack.stop_process(judge, 0)
            raise
        try:
            result = measure(full, judge, args.users, args.duration, args.warmup)
        finally:
            full.stop()
            stack.stop_process(judge)
    print(json.dumps(result, indent=2))
    results.record("load", result, tables(result))


ENDPOINTS = {
    "gateway": "gateway `POST /v1/score` (`rloo_math`)",
    "math": "math `POST /v1/math/score`",
    "judge": "judge",
    "citation": "citation",
    "code": "code",
}


def tables(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The docs' tables: requests and latency, all and per endpoint; the two targets with the
    statuses; RSS per process after the warm-up and at the end."""
    rows = [
        [
            "all",
            f"{result['requests']:,}, {result['throughput_rps']:,.1f}/s",
            f"{result['p50_ms']:,.0f}",
            f"{result['p99_ms']:,.0f}",
        ]
    ]
    for name, label in ENDPOINTS.items():
        entry = result["by_endpoint"].get(name)
        if entry:
            rows.append(
                [
                    label,
                    f"{entry['requests']:,}",
                    f"{entry['p50_ms']:,.0f}",
                    f"{entry['p99_ms']:,.0f}",
                ]
            )
    statuses = ", ".join(
        f"{count:,} × {status}" for status, count in sorted(result["status_counts"].items())
    )
    growth = result["rss_growth_pct"]
    return [
        results.table(
            ["endpoint", "requests", "p50 ms", "p99 ms"],
            rows,
            title=f"{result['users']:,} users for {result['duration_s']:.0f} s",
        ),
        results.table(
            ["figure", "value", "target"],
            [
                ["statuses", statuses or "none", ""],
                ["`errors_other_than_429`", result["errors_other_than_429"], "0"],
                ["`rss_growth_max_pct`", result["rss_growth_max_pct"], "≤ 10"],
            ],
        ),
        results.table(
            ["process", "RSS after the warm-up, MB", "at the end, MB", "growth"],
            [
                [
                    label,
                    start,
                    result["rss_end_mb"].get(label, ""),
                    f"{growth[label]:+.1f} %" if label in growth else "",
                ]
                for label, start in sorted(result["rss_start_mb"].items())
            ],
        ),
    ]


def measure(
    full: stack.FullStack,
    judge: subprocess.Popen[bytes],
    users: int,
    duration_s: float,
    warmup_s: float,
) -> dict[str, Any]:
    """Run the load on a started stack and gather the figures."""
    urls = {name: service.base_url for name, service in full.services.items()}
    processes = {**full.processes(), "fake_judge_model": judge}
    env, runner, statuses, gevent = run_load(urls, users, duration_s, warmup_s)
    rss_start = rss_by_process(processes)
    started = time.monotonic()
    gevent.sleep(duration_s)
    runner.stop()
    elapsed = time.monotonic() - started
    rss_end = rss_by_process(processes)
    total = env.stats.total
    per_endpoint = {
        name: {
            "requests": entry.num_requests,
            "p50_ms": entry.get_response_time_percentile(0.5),
            "p99_ms": entry.get_response_time_percentile(0.99),
        }
        for (name, _method), entry in sorted(env.stats.entries.items())
    }
    growth = {
        label: round(100.0 * (rss_end[label] - start) / start, 1)
        for label, start in rss_start.items()
        if start > 0 and rss_end.get(label)
    }
    errors = sum(
        v
        for k, v in statuses.items()
        if k not in ("200", "429") and not k.startswith("connection_error ")
    )
    return {
        "users": users,
        "duration_s": round(elapsed, 1),
        "requests": total.num_requests,
        "throughput_rps": round(total.num_requests / elapsed, 1),
        "p50_ms": total.get_response_time_percentile(0.5),
        "p99_ms": total.get_response_time_percentile(0.99),
        "by_endpoint": per_endpoint,
        "status_counts": dict(statuses),
        "rss_start_mb": {k: round(v / 2**20, 1) for k, v in rss_start.items()},
        "rss_end_mb": {k: round(v / 2**20, 1) for k, v in rss_end.items()},
        "rss_growth_pct": growth,
        "errors_other_than_429": errors,
        "rss_growth_max_pct": max(growth.values(), default=0.0),
    }


if __name__ == "__main__":
    main()
