"""Code-interpreter sessions: start latency, per-call overhead, memory, a 16-turn episode.

Run: ``python -m bench run sessions`` (prints one JSON object and records it:
``bench/results/sessions.json`` with ``--record``). It starts a throwaway redis-server, the
code API and one worker (``TRIBUNAL_CODE_MAX_SESSIONS=32``) with ``tribunal.testing.stack``
and measures, over HTTP as a trainer's tool calls go:

- ``start``: ``POST /v1/code/sessions`` then ``DELETE``, one at a time (``--starts``): the
  start's latency, p50 and p99 (target p50 <= 300 ms: about a Firecracker microVM's cold
  start);
- ``call``: a one-line cell (``print(1)``) on a warm session against the same program through
  a warm ``POST /v1/code/run`` (``--calls`` each, alternated): p50 of each, and the session's
  per-call overhead, p50 session minus p50 run (target <= 20 ms; negative: cheaper);
- ``memory``: 32 sessions held at once, each after one cell; what they add to the proportional
  set size (PSS) of the worker's process tree, per session, and what one worker then holds
  per GiB;
- ``episode``: a 16-turn episode (turn k defines ``v_k`` from ``v_{k-1}`` and does a little
  work) on one session, against 16 stateless ``/v1/code/run`` calls that each resend every
  earlier turn (the agent's history): total wall time of each, median of ``--episodes``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import results, stats
from tribunal.testing.stack import service_stack

TURN = "v{k} = v{j} + sum(i * i for i in range(2000)) % 7 + {k}\nprint(v{k})\n"
"""Turn k of the episode (v0 is set by turn 0); a little work, a little output."""


def turn(k: int) -> str:
    """The code of turn ``k``."""
    return "v0 = 0\nprint(v0)\n" if k == 0 else TURN.format(k=k, j=k - 1)


def timed(client: httpx.Client, method: str, url: str, **kwargs: Any) -> tuple[float, Any]:
    """``(ms, response)`` of one request; raises on an HTTP error."""
    started = time.perf_counter()
    response = client.request(method, url, **kwargs)
    elapsed = (time.perf_counter() - started) * 1000
    response.raise_for_status()
    return elapsed, response


def bench_start(client: httpx.Client, n: int) -> dict[str, float]:
    """Start and close ``n`` sessions, one at a time."""
    latencies = []
    for _ in range(n):
        ms, response = timed(client, "POST", "/v1/code/sessions", json={})
        latencies.append(ms)
        client.delete(f"/v1/code/sessions/{response.json()['session_id']}")
    return {
        "p50_ms": stats.percentile(latencies, 0.5),
        "p99_ms": stats.percentile(latencies, 0.99),
        "n": n,
    }


def bench_call(client: httpx.Client, n: int) -> dict[str, float]:
    """A one-line cell on a warm session against a warm ``/v1/code/run``, alternated."""
    session = client.post("/v1/code/sessions", json={}).json()["session_id"]
    run_ms, cell_ms, inside_ms = [], [], []
    for _ in range(5):  # warm both paths
        timed(client, "POST", "/v1/code/run", json={"language": "python", "code": "print(1)"})
        timed(client, "POST", f"/v1/code/sessions/{session}/run", json={"code": "print(1)"})
    for _ in range(n):
        ms, _ = timed(
            client, "POST", "/v1/code/run", json={"language": "python", "code": "print(1)"}
        )
        run_ms.append(ms)
        ms, response = timed(
            client, "POST", f"/v1/code/sessions/{session}/run", json={"code": "print(1)"}
        )
        cell_ms.append(ms)
        inside_ms.append(response.json()["time_ms"])
    client.delete(f"/v1/code/sessions/{session}")
    run_p50, cell_p50 = statistics.median(run_ms), statistics.median(cell_ms)
    return {
        "run_p50_ms": run_p50,
        "run_p99_ms": stats.percentile(run_ms, 0.99),
        "session_p50_ms": cell_p50,
        "session_p99_ms": stats.percentile(cell_ms, 0.99),
        "overhead_p50_ms": cell_p50 - run_p50,
        "cell_in_sandbox_p50_ms": statistics.median(inside_ms),
        "n": n,
    }


def tree_pss_mib(pid: int) -> float:
    """PSS of ``pid`` and all its descendants, MiB."""
    root = psutil.Process(pid)
    total = 0
    for process in [root, *root.children(recursive=True)]:
        try:
            total += process.memory_full_info().pss
        except psutil.Error:
            continue
    return total / (1 << 20)


def bench_memory(client: httpx.Client, worker_pid: int, n: int) -> dict[str, float]:
    """Hold ``n`` sessions at once (each after one cell); their PSS per session."""
    before = tree_pss_mib(worker_pid)
    held = []
    for _ in range(n):
        session = client.post("/v1/code/sessions", json={}).json()["session_id"]
        client.post(f"/v1/code/sessions/{session}/run", json={"code": "x = list(range(1000))"})
        held.append(session)
    time.sleep(0.5)
    after = tree_pss_mib(worker_pid)
    for session in held:
        client.delete(f"/v1/code/sessions/{session}")
    per_session = (after - before) / n
    return {
        "sessions": n,
        "worker_tree_pss_before_mib": round(before, 1),
        "worker_tree_pss_after_mib": round(after, 1),
        "per_session_mib": round(per_session, 2),
        "sessions_per_gib": int(1024 // per_session) if per_session > 0 else 0,
    }


def bench_episode(client: httpx.Client, turns: int, rounds: int) -> dict[str, Any]:
    """A ``turns``-turn episode on one session against stateless runs resending history."""
    session_s, stateless_s = [], []
    for _ in range(rounds):
        started = time.perf_counter()
        session = client.post("/v1/code/sessions", json={}).json()["session_id"]
        for k in range(turns):
            reply = client.post(f"/v1/code/sessions/{session}/run", json={"code": turn(k)})
            assert reply.json()["status"] == "ok", reply.text
        client.delete(f"/v1/code/sessions/{session}")
        session_s.append(time.perf_counter() - started)
        started = time.perf_counter()
        for k in range(turns):
            history = "".join(turn(j) for j in range(k + 1))
            reply = client.post("/v1/code/run", json={"language": "python", "code": history})
            assert reply.json()["exit_code"] == 0, reply.text
        stateless_s.append(time.perf_counter() - started)
    return {
        "turns": turns,
        "session_s": statistics.median(session_s),
        "stateless_resend_s": statistics.median(stateless_s),
        "speedup": statistics.median(stateless_s) / statistics.median(session_s),
        "rounds": rounds,
    }


def main() -> None:
    """Run the four measurements and record them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=60)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--held", type=int, default=32)
    parser.add_argument("--episodes", type=int, default=3)
    args = parser.parse_args()
    env = {
        "TRIBUNAL_CODE_SLOTS": "2",
        "TRIBUNAL_CODE_MAX_SESSIONS": str(args.held),
    }
    with (
        service_stack("code", env=env) as running,
        httpx.Client(base_url=running.base_url, timeout=60) as client,
    ):
        worker_pid = running.processes["worker0"].pid
        report = {
            "start": bench_start(client, args.starts),
            "call": bench_call(client, args.calls),
            "memory": bench_memory(client, worker_pid, args.held),
            "episode": bench_episode(client, 16, args.episodes),
        }
    print(json.dumps(report, indent=1))
    start, call, memory, episode = (report[k] for k in ("start", "call", "memory", "episode"))

    def p50_p99(p50: float, p99: float) -> str:
        return f"{p50:.1f} / {p99:.1f}"

    rows = [
        ["session start (create, HTTP)", p50_p99(start["p50_ms"], start["p99_ms"]), "p50 <= 300"],
        ["warm `/v1/code/run`, `print(1)`", p50_p99(call["run_p50_ms"], call["run_p99_ms"]), ""],
        ["session call, `print(1)`", p50_p99(call["session_p50_ms"], call["session_p99_ms"]), ""],
        ["session call overhead vs run (p50)", f"{call['overhead_p50_ms']:+.1f}", "<= 20"],
    ]
    latency = results.table(["what", "p50 / p99 ms", "target ms"], rows, "Latency")
    held = results.table(
        ["sessions held", "worker tree PSS before / after MiB", "per session MiB", "per GiB"],
        [
            [
                memory["sessions"],
                f"{memory['worker_tree_pss_before_mib']:,.0f} / "
                f"{memory['worker_tree_pss_after_mib']:,.0f}",
                f"{memory['per_session_mib']:.1f}",
                memory["sessions_per_gib"],
            ]
        ],
        "Memory",
    )
    ep = results.table(
        ["episode", "one session s", "16 stateless runs resending history s", "speed-up"],
        [
            [
                f"{episode['turns']} turns",
                f"{episode['session_s']:.2f}",
                f"{episode['stateless_resend_s']:.2f}",
                f"{episode['speedup']:.2f}x",
            ]
        ],
        "Episode",
    )
    results.record("sessions", report, [latency, held, ep])


if __name__ == "__main__":
    main()
