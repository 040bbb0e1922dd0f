"""One-item requests through the gateway's synchronous route against the math route: requests
per second and latency at a fixed concurrency, and optionally a py-spy profile of the gateway
API while it serves them (what found that httpcore's connection pool took 36 % of its CPU).

The stack is ``tribunal.testing.stack.start_full_stack`` on a throwaway Redis, on 127.0.0.1.
``--concurrency`` clients (one ``httpx.AsyncClient`` pool) each send one item, wait for its
answer and send the next, for ``--seconds``: first to ``POST /v1/math/score`` (a warm-up of
5 s, or ``--seconds`` if shorter, then measured), then to the gateway's ``POST /v1/score``
with the ``rloo_math`` spec, each with a fresh number so that no result cache answers.
Prints one JSON object per route.

py-spy is not a dependency of the project: install it apart (``pip install --target DIR
py-spy==0.4.3``) and pass its binary; its raw output (``--profile FILE``, folded stacks)
counts one sample per 5 ms that the API's thread is busy, so samples / 200 / requests is the
API's CPU seconds per request.

    python bench/gateway_one_item.py --concurrency 50 --seconds 15 \\
        --py-spy DIR/bin/py-spy --profile gateway.raw
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import stats
from tribunal.testing import stack


def math_item(n: int) -> dict[str, Any]:
    """A math item numbered ``n`` whose answer is right."""
    return {"id": "m", "response": f"The answer is \\boxed{{{n}}}.", "ground_truth": str(n)}


async def drive(
    url: str, path: str, make: Callable[[int], dict[str, Any]], clients: int, seconds: float
) -> dict[str, Any]:
    """``clients`` loops of one-item requests to ``url + path`` for ``seconds``."""
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    limits = httpx.Limits(max_connections=clients)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as http:
        end = time.monotonic() + seconds

        async def one() -> None:
            while time.monotonic() < end:
                started = time.monotonic()
                answer = await http.post(path, json={"items": [make(random.randrange(10**9))]})
                latencies.append(time.monotonic() - started)
                statuses[answer.status_code] = statuses.get(answer.status_code, 0) + 1

        await asyncio.gather(*(one() for _ in range(clients)))
    latencies.sort()
    return {
        "path": path,
        "requests": len(latencies),
        "rps": round(len(latencies) / seconds, 1),
        "p50_ms": round(1000 * stats.percentile(latencies, 0.5)),
        "p99_ms": round(1000 * stats.percentile(latencies, 0.99)),
        "statuses": statuses,
    }


def main() -> None:
    """Command line: start the stack, drive both routes, print their figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=50, help="Clients at once (<= 500).")
    parser.add_argument("--seconds", type=float, default=15.0, help="Per route (<= 120).")
    parser.add_argument("--py-spy", default=None, help="py-spy's binary, to profile the gateway.")
    parser.add_argument("--profile", default="gateway.raw", help="py-spy's raw output file.")
    args = parser.parse_args()
    if not (1 <= args.concurrency <= 500 and 0 < args.seconds <= 120):
        parser.error("bounded: --concurrency 1..500, --seconds 0..120")
    clients, seconds = args.concurrency, args.seconds
    with tempfile.TemporaryDirectory() as tmp, stack.redis_server() as redis:
        full = stack.start_full_stack(
            redis.url,
            env={"TRIBUNAL_KEY_PREFIX": "oneitem", "TRIBUNAL_LOG_LEVEL": "WARNING"},
            log_dir=Path(tmp),
        )
        try:
            urls = {name: service.base_url for name, service in full.services.items()}
            asyncio.run(drive(urls["math"], "/v1/math/score", math_item, clients, min(5, seconds)))
            math = asyncio.run(drive(urls["math"], "/v1/math/score", math_item, clients, seconds))
            print(json.dumps(math), flush=True)
            spy = None
            if args.py_spy:
                pid = full.processes()["gateway.api"].pid
                record = ["record", "-r", "200", "-d", str(int(seconds)), "-f", "raw"]
                spy = subprocess.Popen([args.py_spy, *record, "-o", args.profile, "-p", str(pid)])
            gateway = asyncio.run(
                drive(
                    urls["gateway"],
                    "/v1/score",
                    lambda n: {**math_item(n), "spec": "rloo_math"},
                    clients,
                    seconds,
                )
            )
            print(json.dumps(gateway), flush=True)
            if spy is not None:
                spy.wait()
        finally:
            full.stop()


if __name__ == "__main__":
    main()
