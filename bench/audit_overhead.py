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
processes).

The rates are interleaved: each of ``--rounds`` rounds runs one pass of every rate, in an
order drawn afresh per round (seeded), after a garbage collection, so that a drift of the
machine (other work on its cores, its clock) falls on every rate alike. ``cpu_us_per_item``
is the median per rate of this process's CPU time (user + system, its threads included) per
item; ``overhead`` the median over the rounds of each round's relative difference to its
pass at rate 0 (:func:`overheads`: what moved between rounds cancels); ``overhead_ci`` a
95 % percentile bootstrap interval of that median (``BOOTSTRAP`` resamples of the rounds),
None with one round.

The difference of two whole passes carries the noise of the gateway's whole work, several
times the effect at 5 % on a shared machine. So each round also runs a *hook pass*
(:func:`hook_pass`) of rates 0, 5 % and 100 %, which times ``Auditor.after`` and the drain of
what it started, alone: ``overhead_direct`` is the median over the rounds of the hook's extra
CPU at a rate over its CPU at rate 0, divided by the whole pass's CPU at rate 0, with its
bootstrap interval ``overhead_direct_ci`` (:func:`direct_overheads`). ``load`` records the
load average before, after and at the start of each round (the figures move with it: a run at
a load above the cores' count is not one to record).

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
import gc
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import results
from bench._stack import redis_server
from bench.stats import load_avg
from tribunal.core.queue.keys import Keys
from tribunal.gateway import GatewayVerifier, load_spec_text
from tribunal.gateway.audit import Auditor, AuditPair, RedisAuditStore
from tribunal.gateway.specs import LoadedSpec
from tribunal.wire.envelope import ItemOutcome, ScoreItem, VerifierInfo

BATCH = 256
GROUP = 8
BOOTSTRAP = 5000
"""Resamples of the rounds behind each ``overhead_ci``."""

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
    """The auditor's scoring, excluded: an outcome at once for every item (one outcome,
    built once: building a pydantic model per item was the stand-in's own cost, counted as
    the audit's)."""

    def __init__(self, gateway: GatewayVerifier) -> None:
        self.specs: dict[str, LoadedSpec] = gateway.specs
        self.item_model: type[ScoreItem] = gateway.item_model
        self._outcome = ItemOutcome(reward=0.0)

    async def score_outcomes(self, items: Sequence[ScoreItem]) -> list[ItemOutcome]:
        """Reward 0 for every item."""
        return [self._outcome] * len(items)


def rollouts(items: int, round_: int) -> list[dict[str, Any]]:
    """``items`` raw spec items of round ``round_``, in groups of ``GROUP``."""
    return [
        {"id": f"{round_}-{i}", "group_id": f"{round_}-{i // GROUP}", "spec": "train",
         "response": "so the answer is \\boxed{7}", "ground_truth": "7"}
        for i in range(items)
    ]  # fmt: skip


async def one_pass(rate: float, items: int, url: str, round_: int) -> float:
    """CPU seconds of this process for ``items`` items at audit ``rate`` (-1: neither audits
    nor hack signatures; 0: signatures only)."""
    specs = {"train": load_spec_text(training_spec(rate)), "strict": load_spec_text(STRICT)}
    gateway = GatewayVerifier(specs, InstantVerifiers)
    client = aioredis.from_url(url)
    store = RedisAuditStore(client, Keys(f"bench{round_}r{rate}"))
    auditor = Auditor(InstantAuditor(gateway), store)
    info = VerifierInfo(name="gateway", version="1", config_hash="0" * 16)
    raw = rollouts(items, round_)
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


async def hook_pass(rate: float, items: int, url: str, round_: int) -> float:
    """CPU seconds of this process's main thread in the audit hook alone, for ``items`` items
    at audit ``rate`` (0: the hack signatures' share of the hook only): the batches are scored
    first, untimed, then every batch's ``Auditor.after`` and the drain of what they started
    (the audits, the writes) are timed with ``time.thread_time`` (the signatures' thread is
    not counted, and does the same work at every rate).

    The difference of two such figures is the audit's own work, measured on its own: a
    small quantity whose noise is a share of itself, where the difference of two whole
    passes carries the noise of the gateway's whole work. Its writes batch more than a
    streaming pass's (every batch's pairs are pending at once: the bound on pending items is
    lifted for it), as a gateway's do under load.
    """
    specs = {"train": load_spec_text(training_spec(rate)), "strict": load_spec_text(STRICT)}
    gateway = GatewayVerifier(specs, InstantVerifiers)
    client = aioredis.from_url(url)
    store = RedisAuditStore(client, Keys(f"hook{round_}r{rate}"))
    auditor = Auditor(InstantAuditor(gateway), store, max_pending_items=4 * items)
    info = VerifierInfo(name="gateway", version="1", config_hash="0" * 16)
    raw = rollouts(items, round_)
    scored = []
    for first in range(0, items, BATCH):
        batch = [gateway.item_model.model_validate(r) for r in raw[first : first + BATCH]]
        scored.append((batch, await gateway.score_results(batch, info), first // BATCH))
    await client.ping()  # the connection is the store's, not the hook's
    started = time.thread_time()
    for batch, texts, step in scored:
        auditor.after(batch, texts, step=step)
    await auditor.drain()
    spent = time.thread_time() - started
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


def bootstrap(statistic: Callable[[Sequence[int]], float], rounds: int, seed: int) -> list[float]:
    """A 95 % percentile bootstrap interval of ``statistic`` (a function of the rounds'
    indices, given with repeats) over ``BOOTSTRAP`` resamples of ``rounds`` rounds.

    Raises:
        ValueError: Fewer than two rounds.
    """
    if rounds < 2:
        raise ValueError("a bootstrap interval needs two rounds or more")
    rng = random.Random(seed)
    values = sorted(
        statistic([rng.randrange(rounds) for _ in range(rounds)]) for _ in range(BOOTSTRAP)
    )
    return [round(values[int(0.025 * BOOTSTRAP)], 4), round(values[int(0.975 * BOOTSTRAP) - 1], 4)]


def overheads(
    spent: dict[float, list[float]], seed: int = 0
) -> tuple[dict[str, float], dict[str, list[float] | None]]:
    """Each rate's overhead against rate 0 in whole passes: the median over the rounds of the
    round's ratio (its pass of that rate over its pass of rate 0, less 1), and its 95 %
    bootstrap interval over the rounds (None below two rounds).

    The ratio is taken within a round, whose passes ran one after the other: a stretch of
    the machine's load that slows a round's passes alike cancels in it, which a ratio of
    the rates' own medians, taken across rounds, keeps.

    Args:
        spent: Per rate, the CPU seconds of each round's pass (the same rounds, in order).
        seed: The bootstrap's seed (a rerun on the same figures gives the same interval).

    Returns:
        ``({rate: overhead}, {rate: [low, high]})``, rates as ``str(rate)``, fractions.
    """
    base = spent[0.0]
    point: dict[str, float] = {}
    interval: dict[str, list[float] | None] = {}
    for rate, passes in spent.items():
        ratios = [cost / zero - 1 for cost, zero in zip(passes, base, strict=True)]

        def middle(draw: Sequence[int], ratios: list[float] = ratios) -> float:
            return statistics.median([ratios[i] for i in draw])

        point[str(rate)] = middle(range(len(base)))
        interval[str(rate)] = None if len(base) < 2 else bootstrap(middle, len(base), seed)
    return point, interval


def direct_overheads(
    hooks: dict[float, list[float]], base: list[float], seed: int = 0
) -> tuple[dict[str, float], dict[str, list[float] | None]]:
    """Each audited rate's overhead measured on the hook alone (:func:`hook_pass`): the
    median over the rounds of the round's hook CPU at that rate less its hook CPU at rate 0
    (the audit's own work), over the median CPU of a whole pass at rate 0; and its 95 %
    bootstrap interval over the rounds (None below two rounds).

    Args:
        hooks: Per rate (0 among them), each round's hook CPU seconds.
        base: Each round's whole-pass CPU seconds at rate 0 (the same number of items).
        seed: The bootstrap's seed.

    Returns:
        ``({rate: overhead}, {rate: [low, high]})`` for the rates other than 0, fractions.
    """
    point: dict[str, float] = {}
    interval: dict[str, list[float] | None] = {}
    for rate, spent in hooks.items():
        if rate == 0.0:
            continue
        extra = [cost - zero for cost, zero in zip(spent, hooks[0.0], strict=True)]

        def share(draw: Sequence[int], extra: list[float] = extra) -> float:
            return statistics.median([extra[i] for i in draw]) / statistics.median(
                [base[i] for i in draw]
            )

        point[str(rate)] = share(range(len(base)))
        interval[str(rate)] = None if len(base) < 2 else bootstrap(share, len(base), seed)
    return point, interval


def tables(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The docs' tables: CPU per item by rate, and the store's memory."""
    cpu, over = report["cpu_us_per_item"], report["overhead"]
    direct = report.get("overhead_direct", {})

    def share(value: float | None, ends: list[float] | None) -> str:
        if value is None:
            return ""
        if not ends:
            return f"{100 * value:+.1f} %"
        return f"{100 * value:+.1f} % ({100 * ends[0]:+.1f} to {100 * ends[1]:+.1f})"

    rows = [
        [
            "no audit, no signatures" if r == "-1.0" else f"{float(r):.0%} (with signatures)",
            f"{cpu[r]:.1f}",
            "" if r == "0.0" else share(over[r], report.get("overhead_ci", {}).get(r)),
            share(direct.get(r), report.get("overhead_direct_ci", {}).get(r)),
        ]
        for r in cpu
    ]
    memory = report["memory"]
    load = report.get("load", {})
    seen = load.get("rounds_1m")
    at = f", load {min(seen):.1f}–{max(seen):.1f}" if seen else ""
    return [
        results.table(
            [
                "audit rate",
                "gateway CPU µs per item (median)",
                "vs rate 0, whole passes (95 % interval)",
                "vs rate 0, the audit's own work (95 % interval)",
            ],
            rows,
            title=f"{report['items']:,} items per pass, {report['rounds']} rounds{at}",
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
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--fill", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0, help="Seeds the order and bootstrap.")
    args = parser.parse_args()
    rates = (-1.0, 0.0, 0.05, 1.0)
    hooked = (0.0, 0.05, 1.0)
    runs = [(one_pass, r) for r in rates] + [(hook_pass, r) for r in hooked]
    order_rng = random.Random(args.seed)
    load_before = load_avg()
    seen: list[float] = []
    spent: dict[float, list[float]] = {r: [] for r in rates}
    hooks: dict[float, list[float]] = {r: [] for r in hooked}
    with redis_server() as url:
        asyncio.run(one_pass(0.05, BATCH * 4, url, -1))  # warm-up: imports, connections
        asyncio.run(hook_pass(0.05, BATCH * 4, url, -1))
        for n in range(args.rounds):
            seen.append(load_avg()[0])
            for run, rate in order_rng.sample(runs, len(runs)):
                gc.collect()  # no pass pays for the garbage of the one before it
                taken = asyncio.run(run(rate, args.items, url, n))
                (spent if run is one_pass else hooks)[rate].append(taken)
        memory = asyncio.run(fill(url, args.fill))
    cpu = {str(r): statistics.median(s) * 1e6 / args.items for r, s in spent.items()}
    point, interval = overheads(spent, args.seed)
    direct, direct_interval = direct_overheads(hooks, spent[0.0], args.seed)
    report = {
        "items": args.items,
        "rounds": args.rounds,
        "cpu_us_per_item": {r: round(v, 2) for r, v in cpu.items()},
        "overhead": {r: round(v, 4) for r, v in point.items()},
        "overhead_ci": interval,
        "hook_us_per_item": {
            str(r): round(statistics.median(s) * 1e6 / args.items, 3) for r, s in hooks.items()
        },
        "overhead_direct": {r: round(v, 4) for r, v in direct.items()},
        "overhead_direct_ci": direct_interval,
        "signatures_overhead": round(cpu["0.0"] / cpu["-1.0"] - 1, 4),
        "passes_us_per_item": {
            str(r): [round(x * 1e6 / args.items, 2) for x in s] for r, s in spent.items()
        },
        "memory": memory,
        "load": {"before": load_before, "after": load_avg(), "rounds_1m": seen},
    }
    print(json.dumps(report))
    results.record("audit_overhead", report, tables(report))


if __name__ == "__main__":
    main()
