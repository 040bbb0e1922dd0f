"""Rubric verdicts/s of JudgeVerifier in-process against the fake judge server.

The fake judge (tribunal.llm.testing.fake_openai) runs as its own process with a fixed
latency and a concurrency cap, like a vLLM server whose every request takes `latency_ms`
and that runs `cap` sequences at once; the ideal throughput is cap / latency calls/s, times
k verdicts per call. The verifier scores 10,000 verdicts queued at once, in batches of 64
items scored concurrently (as the core's workers do), with `max_concurrency = cap`.

    .venv/bin/python bench/judge_verifier_throughput.py [--verdicts 10000] [--k 1 4]

Prints, per k: verdicts/s, % of ideal, time to first verdict (client side: first call
returned) and to first finished batch.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._stack import ROOT, fake_judge_argv, free_port, processes
from tribunal.judge.config import JudgeConfig
from tribunal.judge.verifier import JudgeVerifier
from tribunal.llm.base import Completion, CompletionRequest
from tribunal.llm.config import BackendConfig
from tribunal.testing.stack import wait_ready
from tribunal.wire.judge import JudgeItem

RUBRICS_PER_ITEM = 4
BATCH_ITEMS = 64


@contextlib.contextmanager
def fake_judge(latency_ms: float, cap: int) -> Iterator[str]:
    """Run the fake judge as a process of its own (in this one it would share the GIL with the
    verifier under test); yield its base URL (``.../v1``); stop it on exit."""
    port = free_port()
    argv = fake_judge_argv(port, latency_ms, cap)
    with processes([argv], {"PYTHONPATH": str(ROOT)}) as (server,):
        wait_ready(f"http://127.0.0.1:{port}", 30, {"fake judge": server}, path="/stats")
        yield f"http://127.0.0.1:{port}/v1"


def make_items(n_verdicts: int, tag: str) -> list[JudgeItem]:
    n_items = n_verdicts // RUBRICS_PER_ITEM
    filler = "The response discusses the question in some detail. " * 20
    return [
        JudgeItem(
            id=f"{tag}-{i}",
            question=f"Question {tag}-{i}: what does the literature say about topic {i}?",
            response=f"Answer {i}. {filler}",
            rubrics=[
                {
                    "text": f"Criterion {j} of item {i}.",
                    "polarity": "negative" if j == 3 else "positive",
                }
                for j in range(RUBRICS_PER_ITEM)
            ],
            rubric_sets=[],
        )
        for i in range(n_items)
    ]


async def run(
    url: str, n_verdicts: int, k: int, max_concurrency: int, workers: int
) -> dict[str, Any]:
    backend = BackendConfig(
        kind="openai",
        model="fake-judge",
        base_url=url,
        max_concurrency=max_concurrency,
        timeout_s=60,
    )
    verifier = JudgeVerifier(JudgeConfig(backend=backend, rubrics_per_call=k, cache_max_items=0))
    await verifier.start()
    assert verifier.backend is not None
    inner = verifier.backend.complete
    marks: dict[str, float] = {}

    async def timed(request: CompletionRequest) -> Completion:
        completion = await inner(request)
        marks.setdefault("first_call", time.perf_counter())
        return completion

    verifier.backend.complete = timed  # type: ignore[method-assign]
    items = make_items(n_verdicts, f"k{k}")
    batches = [items[i : i + BATCH_ITEMS] for i in range(0, len(items), BATCH_ITEMS)]

    async def one(batch: list[JudgeItem]) -> int:
        outs = await verifier.score(batch)
        marks.setdefault("first_batch", time.perf_counter())
        return sum(len(o.details["rubrics"]) for o in outs if o.error is None)

    queue: asyncio.Queue[list[JudgeItem]] = asyncio.Queue()
    for batch in batches:
        queue.put_nowait(batch)

    async def worker() -> int:
        # Like a core worker slot: pull the next batch when the previous one is done.
        total = 0
        while not queue.empty():
            total += await one(queue.get_nowait())
        return total

    urllib.request.urlopen(
        urllib.request.Request(url.removesuffix("/v1") + "/reset", method="POST")
    )
    t0 = time.perf_counter()
    if workers:
        done = await asyncio.gather(*(worker() for _ in range(workers)))
    else:
        done = await asyncio.gather(*(one(b) for b in batches))
    elapsed = time.perf_counter() - t0
    await verifier.aclose()
    verdicts = sum(done)
    return {
        "k": k,
        "verdicts": verdicts,
        "errors": len(items) * RUBRICS_PER_ITEM - verdicts,
        "elapsed_s": elapsed,
        "verdicts_per_s": verdicts / elapsed,
        "first_verdict_s": marks["first_call"] - t0,
        "first_batch_s": marks["first_batch"] - t0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verdicts", type=int, default=10_000)
    parser.add_argument("--k", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--cap", type=int, default=128)
    parser.add_argument(
        "--workers",
        type=int,
        nargs="+",
        default=[0, 4],
        help="concurrent batch slots (0: every batch submitted at once)",
    )
    parser.add_argument(
        "--max-concurrency",
        type=int,
        nargs="+",
        default=None,
        help="verifier's in-flight limits to try (default: the server cap, and 2x it)",
    )
    args = parser.parse_args()
    with fake_judge(args.latency_ms, args.cap) as url:
        limits = args.max_concurrency or [args.cap, 2 * args.cap]
        for k, workers, limit in [(k, w, m) for k in args.k for w in args.workers for m in limits]:
            r = asyncio.run(run(url, args.verdicts, k, limit, workers))
            ideal = args.cap / (args.latency_ms / 1000) * k
            mode = f"{workers} batches at a time" if workers else "all batches at once"
            mode += f", max_concurrency {limit}"
            print(
                f"k={k}, {mode}: {r['verdicts']} verdicts ({r['errors']} errors)"
                f" in {r['elapsed_s']:.2f} s"
                f" = {r['verdicts_per_s']:.0f} verdicts/s; ideal {ideal:.0f}/s"
                f" ({100 * r['verdicts_per_s'] / ideal:.1f}%); first verdict"
                f" {r['first_verdict_s'] * 1000:.0f} ms; first batch {r['first_batch_s']:.2f} s"
            )
    print(
        f"command: .venv/bin/python bench/judge_verifier_throughput.py --verdicts {args.verdicts}"
        f" --k {' '.join(map(str, args.k))} --workers {' '.join(map(str, args.workers))}"
        f" --latency-ms {args.latency_ms:g} --cap {args.cap}"
    )


if __name__ == "__main__":
    main()
