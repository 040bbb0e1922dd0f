"""The raw HTTP loop ``bench/math_throughput.py`` uses, as a script a user would write.

Run: ``python bench/raw_loop.py URL ITEMS.jsonl RESULTS.jsonl``. It reads the items (one
JSON object per line), sends them to ``POST /v1/math/score`` in batches of 256 with 8
requests in flight (plain httpx, JSON read as dicts) and writes one result per line, in
input order, and prints its rate (first request to last answer) on standard error. It
imports nothing of Tribunal: ``bench/client_overhead.py`` times it, from
process start to exit, against ``tribunal score`` doing the same job, and calls
:func:`raw_loop` in-process for the scoring phase alone.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import httpx

BATCH = 256
IN_FLIGHT = 8


async def send_all(
    client: httpx.AsyncClient, items: list[dict[str, Any]]
) -> tuple[list[Any], float]:
    """Score ``items`` through ``client`` (its ``base_url`` a math service); return their
    results in order and the seconds from the first request to the last answer."""
    batches = [items[i : i + BATCH] for i in range(0, len(items), BATCH)]
    semaphore = asyncio.Semaphore(IN_FLIGHT)

    async def send(batch: list[dict[str, Any]]) -> list[Any]:
        async with semaphore:
            response = await client.post("/v1/math/score", json={"items": batch})
            response.raise_for_status()
            results: list[Any] = response.json()["results"]
            return results

    started = time.perf_counter()
    answers = await asyncio.gather(*(send(b) for b in batches))
    elapsed = time.perf_counter() - started
    results = [r for answer in answers for r in answer]
    assert len(results) == len(items)
    return results, elapsed


async def raw_loop(base_url: str, items: list[dict[str, Any]]) -> tuple[list[Any], float]:
    """:func:`send_all` through a client of its own."""
    async with httpx.AsyncClient(base_url=base_url, timeout=300) as client:
        return await send_all(client, items)


def main() -> None:
    """Score a JSONL file as the raw loop; write the results as JSONL."""
    base_url, source, out = sys.argv[1:4]
    with open(source) as f:
        items = [json.loads(line) for line in f if line.strip()]
    results, elapsed = asyncio.run(raw_loop(base_url, items))
    with open(out, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in results)
    print(f"{len(items) / elapsed:.1f} items/s", file=sys.stderr)


if __name__ == "__main__":
    main()
