"""What audits cost the gateway: CPU per item at audit rates 0, 5 % and 100 %, and the audit
store's Redis memory after a million audited items.

Run: ``python bench/audit_overhead.py`` (prints one JSON object). In this process, a
``GatewayVerifier`` serves a math spec audited by another (``tribunal.gateway.audit``); its
verifiers are an instant stand-in client (the same constant result for every item, in every
mode), so that what is measured is the gateway's own work per item: validating each item of
a batch of 256 (as the route does), scoring it through the spec and writing its result, then
the audit's share: the sample drawn per group, the sampled results read, the auditor's items
built and validated, the background task, the pairs written to a throwaway Redis and the
counters. The auditor's own scoring is excluded, as the issue asks: the auditor is given a
scorer that answers at once (what a real auditor costs is another spec's scoring, on other
processes). Rates are interleaved over ``--rounds`` rounds; ``cpu_us_per_item`` is the
median per rate of this process's CPU time (user + system) per item, ``overhead`` its
relative difference to rate 0.

Rate ``-1`` is the gateway with neither audits nor hack signatures
(``tribunal.gateway.signatures``, counted for every spec item at every rate, in a thread):
``signatures_overhead`` is rate 0 against it.

``redis_bytes_per_million`` is what Redis holds of one spec's audits after ``--fill`` items
(a batch of 512 per trainer step, windows of 10 steps, every item audited, the hack
signatures' sums written once per step as the auditor writes them): the sum of
``MEMORY USAGE`` of its keys. The store keeps the last 1,000 windows (of pairs and of
signatures) and 1,000 pairs, so the figure is bounded whatever the number of items.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import results
from bench._stack import redis_server
from tribunal.core.queue.keys import Keys
from tribunal.gateway import GatewayVerifier, load_spec_text
from tribunal.gateway.audit import Auditor, AuditPair, RedisAuditStore
from tribunal.gateway.specs import LoadedSpec
from tribunal.wire.envelope import ItemOutcome, ScoreItem, VerifierInfo

BATCH = 256
GROUP = 8

STRICT = """
name: strict
version: "1"
components:
  math: {verifier: math, inputs: {response: response, ground_truth: ground_truth}}
"""


def training_spec(rate: float) -> str:
    """The trained spec, audited at ``rate`` (none at 0)."""
    audit = f"audit: {{spec: strict, rate: {rate}}}\n" if rate > 0 else ""  # -1, 0: none
    return (
        STRICT.replace("name: strict", "name: train").replace(
            "ground_truth}}", "ground_truth, options: {value: {answer_format: lenient}}}}"
        )
        + audit
    )


class InstantVerifiers:
    """The verifiers, answered at once: the same math result for every item."""

    async def score(self, verifier: str, items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """One paid result per item."""
        info = {"name": verifier, "version": "1", "config_hash": "0" * 16}
        return [
            {"id": item["id"], "reward": 1.0, "error": None, "details": {}, "verifier": info}
            for item in items
        ]

    async def aclose(self) -> None:
        """Nothing to close."""


class InstantAuditor:
    """The auditor's scoring, excluded: an outcome at once for every item."""

    def __init__(self, gateway: GatewayVerifier) -> None:
        self.specs: dict[str, LoadedSpec] = gateway.specs
        self.item_model: type[ScoreItem] = gateway.item_model

    async def score_outcomes(self, items: Sequence[ScoreItem]) -> list[ItemOutcome]:
        """Reward 0 for every item."""
        return [ItemOutcome(reward=0.0) for _ in items]


async def one_pass(rate: float, items: int, url: str, round_: int) -> float:
    """CPU seconds of this process for ``items`` items at audit ``rate`` (-1: neither audits
    nor hack signatures; 0: signatures only)."""
    specs = {"train": load_spec_text(training_spec(rate)), "strict": load_spec_text(STRICT)}
    gateway = GatewayVerifier(specs, InstantVerifiers)
    client = aioredis.from_url(url)
    store = RedisAuditStore(client, Keys(f"bench{round_}r{rate}"))
    auditor = Auditor(InstantAuditor(gateway), store)
    info = VerifierInfo(name="gateway", version="1", config_hash="0" * 16)
    raw = [
        {"id": f"{round_}-{i}", "group_id": f"{round_}-{i // GROUP}", "spec": "train",
         "response": "so the answer is \\boxed{7}", "ground_truth": "7"}
        for i in range(items)
    ]  # fmt: skip
    started = time.process_time()
    for first in range(0, items, BATCH):
        batch = [gateway.item_model.model_validate(r) for r in raw[first : first + BATCH]]
        texts = await gateway.score_results(batch, info)
        if rate >= 0:
            auditor.after(batch, texts, step=first // BATCH)
    await auditor.drain()
    spent = time.process_time() - started
    await client.aclose()
    await gateway.aclose()
    return spent


async def fill(url: str, total: int) -> dict[str, Any]:
    """Write ``total`` audited pairs of one spec; its keys' memory in Redis, and the count
    of windows and pairs kept."""
    client = aioredis.from_url(url)
    store = RedisAuditStore(client, Keys("fill"))
    per_step = 512
    for step in range(total // per_step):
        window = f"step:{step - step % 10}"
        pairs = [
            AuditPair(f"{step}-{i}", f"{step}-{i // GROUP}", step, window, 1.0, float(i % 2))
            for i in range(per_step)
        ]
        await store.add("train", float(step - step % 10), pairs)
        sums = {"items": per_step, "length": 40 * per_step, "repetition": 0, "duplicate": 0}
        await store.add_signatures("train", window, float(step - step % 10), sums)
    keys = [k async for k in client.scan_iter(match="fill:audit:*", count=1000)]
    used = sum([await client.memory_usage(k) or 0 for k in keys])
    windows = len(await store.windows("train"))
    kept = len(await store.items("train"))
    signed = len(await store.signature_windows("train"))
    await client.aclose()
    return {
        "items": total,
        "keys": len(keys),
        "bytes": used,
        "windows": windows,
        "pairs": kept,
        "signature_windows": signed,
    }


def tables(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The docs' tables: CPU per item by rate, and the store's memory."""
    cpu, over = report["cpu_us_per_item"], report["overhead"]
    rows = [
        [
            "no audit, no signatures" if r == "-1.0" else f"{float(r):.0%} (with signatures)",
            f"{cpu[r]:.1f}",
            "" if r == "0.0" else f"{100 * over[r]:+.1f} %",
        ]
        for r in cpu
    ]
    memory = report["memory"]
    return [
        results.table(
            ["audit rate", "gateway CPU µs per item (median)", "vs rate 0"],
            rows,
            title=f"{report['items']:,} items per pass, {report['rounds']} rounds",
        ),
        results.table(
            [
                "items audited",
                "Redis keys",
                "Redis bytes",
                "windows kept",
                "pairs kept",
                "signature windows kept",
            ],
            [
                [
                    f"{memory['items']:,}",
                    memory["keys"],
                    f"{memory['bytes']:,}",
                    memory["windows"],
                    memory["pairs"],
                    memory.get("signature_windows", "-"),
                ]
            ],
            title="The audit store of one spec",
        ),
    ]


def main() -> None:
    """Run the passes and the fill; print and record one JSON object."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=8192)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--fill", type=int, default=1_000_000)
    args = parser.parse_args()
    rates = (-1.0, 0.0, 0.05, 1.0)
    load_before = os.getloadavg()
    spent: dict[float, list[float]] = {r: [] for r in rates}
    with redis_server() as url:
        asyncio.run(one_pass(0.05, BATCH * 4, url, -1))  # warm-up: imports, connections
        for n in range(args.rounds):
            order = rates if n % 2 == 0 else tuple(reversed(rates))
            for rate in order:
                spent[rate].append(asyncio.run(one_pass(rate, args.items, url, n)))
        memory = asyncio.run(fill(url, args.fill))
    cpu = {str(r): statistics.median(s) * 1e6 / args.items for r, s in spent.items()}
    report = {
        "items": args.items,
        "rounds": args.rounds,
        "cpu_us_per_item": {r: round(v, 2) for r, v in cpu.items()},
        "overhead": {r: round(v / cpu["0.0"] - 1, 4) for r, v in cpu.items()},
        "signatures_overhead": round(cpu["0.0"] / cpu["-1.0"] - 1, 4),
        "memory": memory,
        "load_before": load_before,
        "load_after": os.getloadavg(),
    }
    print(json.dumps(report))
    results.record("audit_overhead", report, tables(report))


if __name__ == "__main__":
    main()
