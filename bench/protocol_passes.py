"""The passes of ``bench/protocols.py`` that run in a trainer's own environment: OpenRLHF's
client and ``tribunal.client`` side by side in .venv-openrlhf (OpenRLHF as its users install
it, with tribunal-client: ``scripts/trainer_envs.sh``), so that both are timed on the
libraries a trainer's process has (its aiohttp, httpx and pydantic).

Imports nothing of the services: ``protocols.py`` runs it as
``.venv-openrlhf/bin/python bench/protocol_passes.py`` with one JSON request on stdin
(``{"pass": "openrlhf" | "client", "gateway", "rows", "concurrency"}``) and reads the pass's
figures, one JSON object, from the last line of stdout.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import stats
from tribunal.client import TribunalClient

PROMPT = "<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"


async def timed(
    calls: list[Callable[[], Awaitable[Any]]], concurrency: int
) -> tuple[float, list[float], list[Any]]:
    """Run ``calls`` with at most ``concurrency`` at once; (span s, latencies s, answers)."""
    gate = asyncio.Semaphore(concurrency)
    latencies: list[float] = []

    async def one(call: Callable[[], Awaitable[Any]]) -> Any:
        async with gate:
            started = time.perf_counter()
            answer = await call()
            latencies.append(time.perf_counter() - started)
            return answer

    started = time.perf_counter()
    answers = await asyncio.gather(*(one(c) for c in calls))
    return time.perf_counter() - started, latencies, list(answers)


def figures(count: int, span_s: float, latencies: list[float]) -> dict[str, float]:
    """Rate and latency quantiles of one pass."""
    return {
        "rollouts_per_s": round(count / span_s, 1),
        "p50_ms": round(1000 * stats.percentile(latencies, 0.5), 1),
        "p99_ms": round(1000 * stats.percentile(latencies, 0.99), 1),
    }


def spec_item(row: dict[str, str], index: int) -> dict[str, Any]:
    """The gateway item the trainer routes build from ``row``."""
    return {
        "id": str(index),
        "spec": "rloo_math",
        "question": PROMPT.format(question=row["question"]),
        "response": row["answer"],
        "ground_truth": row["label"],
    }


async def openrlhf_pass(gateway: str, rows: list[dict[str, str]], concurrency: int) -> Any:
    """OpenRLHF's ``SingleTurnAgentExecutor._fetch_rewards_via_http``, one sample a request."""
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    executor = SingleTurnAgentExecutor(f"{gateway}/get_reward/rloo_math")

    def call(row: dict[str, str]) -> Callable[[], Awaitable[Any]]:
        prompt = PROMPT.format(question=row["question"])
        query = prompt + row["answer"] + "<|im_end|>"
        return lambda: executor._fetch_rewards_via_http([query], [prompt], [row["label"]])

    span, latencies, answers = await timed([call(r) for r in rows], concurrency)
    assert all(a[0]["rewards"] == [1.0] for a in answers), answers[:3]
    return figures(len(rows), span, latencies)


async def client_pass(gateway: str, rows: list[dict[str, str]], concurrency: int) -> Any:
    """``tribunal.client``, one item a request, ``concurrency`` in flight."""
    async with TribunalClient(gateway, max_concurrency=concurrency) as client:

        def call(index: int, row: dict[str, str]) -> Callable[[], Awaitable[Any]]:
            return lambda: client.score("gateway", [spec_item(row, index)])

        span, latencies, answers = await timed(
            [call(i, r) for i, r in enumerate(rows)], concurrency
        )
    assert all(a[0].reward == 1.0 for a in answers), answers[:3]
    return figures(len(rows), span, latencies)


def main() -> None:
    request = json.loads(sys.stdin.read())
    run = {"openrlhf": openrlhf_pass, "client": client_pass}[request["pass"]]
    answer = asyncio.run(run(request["gateway"], request["rows"], request["concurrency"]))
    print(json.dumps(answer))


if __name__ == "__main__":
    main()
