"""Each trainer protocol through the trainer's own client against ``tribunal.client``.

Run: ``python bench/protocols.py`` (prints one JSON object; ``--items``, ``--rounds``,
``--time-limit-s`` bound it). Loopback only: it starts the math service and the gateway on
the embedded queue, and the code service on a throwaway Redis (when bubblewrap is installed),
with ``tribunal.testing.stack``, result caches off so that every pass scores every item.

Per protocol, the same items go through the trainer's client and through ``tribunal.client``
at the trainer's own concurrency, one after the other, in alternating order over rounds:

- ``openrlhf``: OpenRLHF 0.11.2's ``SingleTurnAgentExecutor._fetch_rewards_via_http`` (a new
  aiohttp session and one sample per request, as each rollout posts when its generation
  ends; OpenRLHF starts every rollout of a batch at once, so its concurrency is the batch:
  ``--openrlhf-concurrency``, 64 here) on ``/get_reward/rloo_math``, against
  ``TribunalClient.score("gateway", [item])`` with as many requests in flight; both in
  OpenRLHF's own environment (.venv-openrlhf, ``bench/protocol_passes.py``, a process per
  pass, timed inside it).
- ``slime``: slime's ``remote_rm`` as its source has it (quoted: slime is not on PyPI), one
  shared aiohttp session of 64 connections, every sample of a batch gathered at once, on
  ``/slime/rloo_math``, against ``TribunalClient`` one item a request, 64 in flight.
- ``trl``: ``tribunal.integrations.trl.remote_reward("rloo_math")`` called as GRPOTrainer
  calls it, one batch of ``--trl-batch`` completions at a time, against
  ``TribunalClient.score`` of the same batches.
- ``sandbox_fusion``: the ``sandbox-fusion`` SDK's ``run_concurrent(run_code, ...)`` (threads,
  its default concurrency 20) on the code service's ``/run_code``, against
  ``TribunalClient.run_code`` (``/v1/code/run``) with 20 in flight.

Figures per path: ``rollouts_per_s`` (items over the span from first request to last answer),
``p50_ms`` / ``p99_ms`` per request (per batch for TRL), medians over rounds; ``ratio`` is the
protocol's rate over ``tribunal.client``'s (the target: at least 0.8).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp

from bench import results
from bench._stack import data_file
from bench.protocol_passes import PROMPT, client_pass, figures, spec_item, timed
from tribunal.client import TribunalClient
from tribunal.testing.stack import RunningService, service_stack, start_service

ROOT = Path(__file__).resolve().parents[1]
OPENRLHF_PYTHON = ROOT / ".venv-openrlhf" / "bin" / "python"
PROGRAM = "print(sum(range({n})))"


def gsm8k(count: int) -> list[dict[str, str]]:
    """``count`` GSM8K gold solutions (the test split, repeated when ``count`` is larger)."""
    lines = data_file("math/gsm8k_test.jsonl").read_text().splitlines()
    rows = []
    for index in range(count):
        row = json.loads(lines[index % len(lines)])
        label = row["answer"].rsplit("####", 1)[1].strip().replace(",", "")
        rows.append({"question": row["question"], "answer": row["answer"], "label": label})
    return rows


# slime/rollout/rm_hub/__init__.py (THUDM/slime at 0b420f1), remote_rm and its shared
# session, as there (the retries are kept: none happens here).
_shared_session: aiohttp.ClientSession | None = None


def _get_shared_session() -> aiohttp.ClientSession:
    global _shared_session
    if _shared_session is None or _shared_session.closed:
        connector = aiohttp.TCPConnector(limit=64, enable_cleanup_closed=True)
        timeout = aiohttp.ClientTimeout(total=120)
        _shared_session = aiohttp.ClientSession(connector=connector, timeout=timeout)
    return _shared_session


async def remote_rm(args: Any, sample: Any, max_retries: int = 10) -> Any:
    """slime's ``remote_rm``."""
    payload = {"prompt": sample.prompt, "response": sample.response, "label": sample.label}
    session = _get_shared_session()
    for attempt in range(max_retries):
        try:
            async with session.post(args.rm_url, json=payload) as resp:
                resp.raise_for_status()
                return await resp.json()
        except Exception:
            if attempt + 1 >= max_retries:
                raise
            await asyncio.sleep(min(2**attempt, 30))


def openrlhf_env(name: str, gateway: str, rows: list[dict[str, str]], concurrency: int) -> Any:
    """``bench/protocol_passes.py``'s pass ``name`` run in .venv-openrlhf: its figures."""
    request = {"pass": name, "gateway": gateway, "rows": rows, "concurrency": concurrency}
    done = subprocess.run(
        [str(OPENRLHF_PYTHON), str(ROOT / "bench" / "protocol_passes.py")],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{name} pass in .venv-openrlhf failed: {done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


async def slime_pass(gateway: str, rows: list[dict[str, str]], concurrency: int) -> Any:
    import types

    args = types.SimpleNamespace(rm_url=f"{gateway}/slime/rloo_math")

    def call(row: dict[str, str]) -> Callable[[], Awaitable[Any]]:
        sample = types.SimpleNamespace(
            prompt=PROMPT.format(question=row["question"]),
            response=row["answer"],
            label=row["label"],
        )
        return lambda: remote_rm(args, sample)

    # slime gathers every sample of a batch; its connector holds 64 connections.
    span, latencies, answers = await timed([call(r) for r in rows], len(rows))
    assert all(a == 1.0 for a in answers), answers[:3]
    if _shared_session is not None:
        await _shared_session.close()
    return figures(len(rows), span, latencies)


async def trl_pass(gateway: str, rows: list[dict[str, str]], batch: int) -> Any:
    from tribunal.integrations.trl import remote_reward

    reward = remote_reward("rloo_math", url=gateway, columns={"label": "ground_truth"})
    batches = [rows[i : i + batch] for i in range(0, len(rows), batch)]

    def call(part: list[dict[str, str]]) -> Callable[[], Awaitable[Any]]:
        prompts = [PROMPT.format(question=r["question"]) for r in part]
        completions = [r["answer"] for r in part]
        labels = [r["label"] for r in part]
        return lambda: reward(prompts, completions, label=labels)

    # GRPOTrainer awaits one batch's rewards before the next step: one at a time.
    span, latencies, answers = await timed([call(p) for p in batches], 1)
    assert all(r == 1.0 for a in answers for r in a), answers[:1]
    return figures(len(rows), span, latencies)


async def client_batch_pass(gateway: str, rows: list[dict[str, str]], batch: int) -> Any:
    """``tribunal.client``, ``batch`` items a request, one at a time."""
    async with TribunalClient(gateway) as client:

        def call(start: int) -> Callable[[], Awaitable[Any]]:
            part = [spec_item(r, start + i) for i, r in enumerate(rows[start : start + batch])]
            return lambda: client.score("gateway", part)

        span, latencies, answers = await timed([call(s) for s in range(0, len(rows), batch)], 1)
    assert all(r.reward == 1.0 for a in answers for r in a), answers[:1]
    return figures(len(rows), span, latencies)


async def sandbox_fusion_pass(code: str, count: int, concurrency: int) -> Any:
    from sandbox_fusion import RunCodeRequest, RunStatus, run_code, run_concurrent

    requests = [RunCodeRequest(code=PROGRAM.format(n=i), language="python") for i in range(count)]
    latencies: list[float] = []

    def one(request: RunCodeRequest) -> Any:
        started = time.perf_counter()
        answer = run_code(request, endpoint=code, max_attempts=1)
        latencies.append(time.perf_counter() - started)
        return answer

    started = time.perf_counter()
    answers = await asyncio.to_thread(
        run_concurrent, one, args=[[r] for r in requests], concurrency=concurrency
    )
    span = time.perf_counter() - started
    assert all(a.status == RunStatus.Success for a in answers), answers[:1]
    return figures(count, span, latencies)


async def client_run_pass(code: str, count: int, concurrency: int) -> Any:
    async with TribunalClient(code, max_concurrency=concurrency) as client:

        def call(i: int) -> Callable[[], Awaitable[Any]]:
            return lambda: client.run_code({"code": PROGRAM.format(n=i), "language": "python"})

        span, latencies, answers = await timed([call(i) for i in range(count)], concurrency)
    assert all(a.exit_code == 0 for a in answers), answers[:1]
    return figures(count, span, latencies)


@contextlib.contextmanager
def stack(with_code: bool) -> Iterator[dict[str, RunningService]]:
    """Math and the gateway (embedded queue), and code on Redis; caches off."""
    off = {"TRIBUNAL_CACHE_TTL_S": "0"}
    memory = {**off, "TRIBUNAL_QUEUE": "memory", "TRIBUNAL_MATH_PROCESSES": "2"}
    with contextlib.ExitStack() as exits:
        math = start_service("math", env=memory)
        exits.callback(math.stop)
        gateway = start_service(
            "gateway", env={**memory, "TRIBUNAL_GATEWAY_MATH_URL": math.base_url}
        )
        exits.callback(gateway.stop)
        running = {"math": math, "gateway": gateway}
        if with_code:
            running["code"] = exits.enter_context(
                service_stack("code", env={**off, "TRIBUNAL_CODE_SLOTS": "4"})
            )
        yield running


def median_of(rounds: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=256, help="items per pass")
    parser.add_argument("--runs", type=int, default=64, help="programs per SandboxFusion pass")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--openrlhf-concurrency", type=int, default=64)
    parser.add_argument("--trl-batch", type=int, default=64)
    parser.add_argument("--time-limit-s", type=float, default=900.0, help="stop starting rounds")
    args = parser.parse_args()
    rows = gsm8k(args.items)
    subprocess.run([str(ROOT / "scripts" / "trainer_envs.sh"), "venv", "openrlhf"], check=True)
    with_code = shutil.which("bwrap") is not None
    pairs: dict[str, tuple[Callable[[], Awaitable[Any]], Callable[[], Awaitable[Any]]]] = {}
    with stack(with_code) as running:
        gateway = running["gateway"].base_url
        c = args.openrlhf_concurrency
        pairs["openrlhf"] = (
            lambda: asyncio.to_thread(openrlhf_env, "openrlhf", gateway, rows, c),
            lambda: asyncio.to_thread(openrlhf_env, "client", gateway, rows, c),
        )
        pairs["slime"] = (
            lambda: slime_pass(gateway, rows, 64),
            lambda: client_pass(gateway, rows, 64),
        )
        pairs["trl"] = (
            lambda: trl_pass(gateway, rows, args.trl_batch),
            lambda: client_batch_pass(gateway, rows, args.trl_batch),
        )
        if with_code:
            code = running["code"].base_url
            pairs["sandbox_fusion"] = (
                lambda: sandbox_fusion_pass(code, args.runs, 20),
                lambda: client_run_pass(code, args.runs, 20),
            )
        measured: dict[str, dict[str, list[dict[str, float]]]] = {
            name: {"protocol": [], "client": []} for name in pairs
        }
        deadline = time.monotonic() + args.time_limit_s
        for round_ in range(args.rounds):
            if round_ and time.monotonic() > deadline:
                break
            for name, (protocol, client) in pairs.items():
                order = [("protocol", protocol), ("client", client)]
                for label, run in order if round_ % 2 == 0 else order[::-1]:
                    measured[name][label].append(asyncio.run(run()))
    report: dict[str, Any] = {
        "items": args.items,
        "rounds": len(measured["openrlhf"]["protocol"]),
        "cpus": os.cpu_count(),
        "concurrency": {
            "openrlhf": args.openrlhf_concurrency,
            "slime": 64,
            "trl": f"1 batch of {args.trl_batch}",
            "sandbox_fusion": 20,
        },
    }
    if not with_code:
        report["sandbox_fusion"] = "skipped: bubblewrap (bwrap) is not installed"
    for name, paths in measured.items():
        protocol, client = median_of(paths["protocol"]), median_of(paths["client"])
        report[name] = {
            "protocol": protocol,
            "client": client,
            "ratio": round(protocol["rollouts_per_s"] / client["rollouts_per_s"], 3),
        }
    print(json.dumps(report))
    results.record("protocols", report, tables(report, args.trl_batch))


PROTOCOLS = {
    "openrlhf": "OpenRLHF 0.11.2 `SingleTurnAgentExecutor`, 1 sample a request, {} in flight",
    "slime": "slime `remote_rm` (quoted), 1 sample a request, {} connections",
    "trl": "TRL `remote_reward`, batches of {}, one at a time",
    "sandbox_fusion": "`sandbox-fusion` SDK `run_concurrent(run_code)`, {} threads",
}


def tables(report: dict[str, Any], trl_batch: int) -> list[dict[str, Any]]:
    """The docs' table: per protocol, the trainer's client and ``tribunal.client`` (rollouts/s,
    p50 / p99 ms; medians over rounds) and the ratio of their rates."""
    width = {**report["concurrency"], "trl": trl_batch}
    rows = []
    for name, label in PROTOCOLS.items():
        if not isinstance(report.get(name), dict):
            continue
        protocol, client = report[name]["protocol"], report[name]["client"]
        rows.append(
            [
                label.format(width[name]),
                _figure(protocol["rollouts_per_s"]),
                f"{_figure(protocol['p50_ms'])} / {_figure(protocol['p99_ms'])}",
                _figure(client["rollouts_per_s"]),
                f"{_figure(client['p50_ms'])} / {_figure(client['p99_ms'])}",
                f"{report[name]['ratio']:.2f}",
            ]
        )
    return [
        results.table(
            [
                "protocol (client, concurrency)",
                "trainer's client rollouts/s",
                "p50 / p99 ms",
                "`tribunal.client` rollouts/s",
                "p50 / p99 ms",
                "ratio",
            ],
            rows,
        )
    ]


def _figure(value: float) -> str:
    """Three significant figures or more: ``38.6``, ``1,524``."""
    return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"


if __name__ == "__main__":
    main()
