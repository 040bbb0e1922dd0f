"""Every Prometheus metric of a service, defined once, in a registry per app.

Counters of scored items, errors by class and cache hits are cluster-wide: workers add to
them in the queue's store (a Redis hash), and any API replica reports them at scrape time,
together with the queue depth and the number of live workers. So are the histograms that
workers observe (an item's latency from enqueue to result, a judge backend call's latency,
a reward spec's rewards): a :class:`Tally` keeps each as counters per bucket, added to the
same hash with the worker's next write, so that Prometheus scrapes only the API processes,
whatever number of worker processes and hosts share the queue (docs/monitoring.md). Request
latency is measured by the API process that served the request; when one ``tribunal api``
runs several processes on one port (``TRIBUNAL_API_PROCESSES``), they share it through
prometheus-client's multiprocess mode (``PROMETHEUS_MULTIPROC_DIR``), so that a scrape,
whichever process answers it, reports every process's requests.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable, Mapping, Sequence

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from tribunal.core.cache import ResultCache
from tribunal.core.queue.base import JobQueue

SHARED_DIR = "PROMETHEUS_MULTIPROC_DIR"
"""prometheus-client's variable: where processes that share their metrics keep them."""

LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)

COST_BUCKETS_USD = (1e-5, 1e-4, 1e-3, 0.01, 0.1, 1.0)
"""Upper bounds of the cost-per-item histogram (USD): a cached item costs 0, one rubric on a
small model ~1e-5, a long report under many rubrics on a frontier model ~0.1."""

REWARD_BUCKETS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 2.0, 5.0, 10.0)
"""Upper bounds of the spec reward histogram (most specs pay in [0, 1], the refiner recipes
up to about 10). A negative reward counts in ``le="0.0"``: a histogram with negative bounds
loses its ``_sum`` and ``_count`` in the exposition format."""

SEP = "|"
"""Separator of the parts of a tallied counter's name (spec, component and error names are
``[a-z0-9_]``; the older counters, ``scored``, ``error:<code>``, have none)."""

MICRO = 1_000_000
"""Sums are kept as integers (Redis's HINCRBY) in millionths: seconds as microseconds."""

NANO = 1_000_000_000
"""Costs are summed in nano-dollars: one judged item often costs less than a hundred
micro-dollars, and a 64-bit counter still holds billions of dollars."""

MAX_OBSERVED = 1_000_000.0
"""Bound on one observation's share of a histogram's sum (units: seconds, reward): a 64-bit
counter in millionths then holds millions of them. Past it, Redis would refuse the increment
(overflow) and with it the worker's write of results."""


class Tally:
    """Counters and histograms observed in one process, taken in one go to be added to the
    cluster-wide stats (``JobQueue.incr_stats``, or a worker's write of results).

    A histogram ``name`` is kept as ``name|le|<bound>`` (observations whose first bucket
    is ``bound``, not cumulative: buckets add across processes), ``name|count`` and
    ``name|sum`` (millionths of the unit); :func:`histogram_from_stats` rebuilds it.
    """

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    def add(self, name: str, amount: int = 1) -> None:
        """Add ``amount`` to counter ``name``."""
        self._counts[name] = self._counts.get(name, 0) + amount

    def observe(self, name: str, value: float, buckets: Sequence[float]) -> None:
        """Count ``value`` (finite) in histogram ``name`` with upper bounds ``buckets``; its
        share of the sum is clipped to ``±MAX_OBSERVED``."""
        bound = next((b for b in buckets if value <= b), math.inf)
        self.add(f"{name}{SEP}le{SEP}{_bound_label(bound)}")
        self.add(f"{name}{SEP}count")
        self.add(f"{name}{SEP}sum", round(max(-MAX_OBSERVED, min(MAX_OBSERVED, value)) * MICRO))

    def take(self) -> dict[str, int]:
        """Return the counters gathered since the last take, and start again from none."""
        counts, self._counts = self._counts, {}
        return counts


def _bound_label(bound: float) -> str:
    return "+Inf" if bound == math.inf else repr(float(bound))


def histogram_from_stats(
    stats: Mapping[str, int], name: str, buckets: Sequence[float]
) -> tuple[list[tuple[str, float]], float] | None:
    """The cumulative buckets and sum of histogram ``name`` tallied in ``stats`` (see
    :class:`Tally`), or None when nothing was observed."""
    if f"{name}{SEP}count" not in stats:
        return None
    cumulative: list[tuple[str, float]] = []
    total = 0
    for bound in (*buckets, math.inf):
        label = _bound_label(bound)
        total += stats.get(f"{name}{SEP}le{SEP}{label}", 0)
        cumulative.append((label, float(total)))
    return cumulative, stats.get(f"{name}{SEP}sum", 0) / MICRO


def entry_age_s(entry_id: str, now: float | None = None) -> float | None:
    """Seconds since a Redis stream entry was added (its id is ``<ms>-<seq>``), or None for
    an id of another form."""
    head, _, _ = entry_id.partition("-")
    if not head.isdigit() or len(head) < 12:  # not a time in ms (a test's "1-0")
        return None
    return max(0.0, (time.time() if now is None else now) - int(head) / 1000)


class _QueueCollector(Collector):
    """Reports the last snapshot taken by :meth:`Metrics.refresh`."""

    def __init__(self) -> None:
        self.depth: dict[str, int] = {}
        self.workers: dict[str, int] = {}
        self.pools: dict[str, tuple[int, int]] = {}
        self.stats: dict[str, dict[str, int]] = {}
        self.stores: dict[str, dict[str, int]] = {}
        self.oldest_age: dict[str, float] = {}
        self.backends: dict[str, tuple[int, int]] = {}
        self.memory_used: int | None = None

    def collect(self) -> Iterable[Metric]:
        depth = GaugeMetricFamily(
            "tribunal_queue_depth", "Items queued or in flight.", labels=["verifier"]
        )
        workers = GaugeMetricFamily(
            "tribunal_live_workers", "Workers with a recent heartbeat.", labels=["verifier"]
        )
        scored = CounterMetricFamily(
            "tribunal_items_scored",
            "Items given a result, by outcome.",
            labels=["verifier", "outcome"],
        )
        errors = CounterMetricFamily(
            "tribunal_item_errors",
            "Items answered with an error, by class.",
            labels=["verifier", "code"],
        )
        pool_busy = GaugeMetricFamily(
            "tribunal_pool_busy",
            "Verification processes or sandbox slots busy, summed over live workers (sampled "
            "at each heartbeat).",
            labels=["verifier"],
        )
        pool_capacity = GaugeMetricFamily(
            "tribunal_pool_capacity",
            "Verification processes or sandbox slots, summed over live workers.",
            labels=["verifier"],
        )
        hits = CounterMetricFamily(
            "tribunal_cache_hits", "Items answered from the result cache.", labels=["verifier"]
        )
        stores = GaugeMetricFamily(
            "tribunal_store_items",
            "Items held by each bounded store: cache (result cache entries), dead_letters "
            "(entries kept), done_jobs (finished jobs kept, all verifiers').",
            labels=["verifier", "store"],
        )
        dropped = CounterMetricFamily(
            "tribunal_dead_letters_dropped",
            "Dead letters dropped, oldest first, past TRIBUNAL_MAX_DEAD_LETTERS.",
            labels=["verifier"],
        )
        memory = GaugeMetricFamily(
            "tribunal_redis_used_memory_bytes", "Redis's used_memory (absent without Redis)."
        )
        if self.memory_used is not None:
            memory.add_metric([], self.memory_used)
        for verifier, sizes in self.stores.items():
            for store in ("cache", "dead_letters", "done_jobs"):
                if store in sizes:
                    stores.add_metric([verifier, store], sizes[store])
            dropped.add_metric([verifier], sizes.get("dead_letters_dropped", 0))
        for verifier, value in self.depth.items():
            depth.add_metric([verifier], value)
        for verifier, value in self.workers.items():
            workers.add_metric([verifier], value)
        for verifier, (busy, capacity) in self.pools.items():
            pool_busy.add_metric([verifier], busy)
            pool_capacity.add_metric([verifier], capacity)
        for verifier, stats in self.stats.items():
            errors_total = 0
            for name, value in stats.items():
                if name.startswith("error:"):
                    errors.add_metric([verifier, name.removeprefix("error:")], value)
                    errors_total += value
            scored.add_metric([verifier, "reward"], stats.get("scored", 0))
            scored.add_metric([verifier, "error"], errors_total)
            hits.add_metric([verifier], stats.get("cache_hits", 0))
        return [
            depth,
            workers,
            pool_busy,
            pool_capacity,
            scored,
            errors,
            hits,
            stores,
            dropped,
            memory,
            *self._loads(),
            *_worker_tallies(self.stats),
            *_spec_tallies(self.stats),
            *_audit_tallies(self.stats),
            *_signature_tallies(self.stats),
        ]

    def _loads(self) -> list[Metric]:
        oldest = GaugeMetricFamily(
            "tribunal_queue_oldest_age_seconds",
            "Age of the oldest item queued or in flight (0 when none).",
            labels=["verifier"],
        )
        for verifier, age in self.oldest_age.items():
            oldest.add_metric([verifier], age)
        backend_busy = GaugeMetricFamily(
            "tribunal_backend_in_flight",
            "LLM backend calls in flight, summed over live workers (sampled at each heartbeat).",
            labels=["verifier"],
        )
        backend_capacity = GaugeMetricFamily(
            "tribunal_backend_concurrency",
            "LLM backend concurrency bound (TRIBUNAL_<NAME>_MAX_CONCURRENCY), summed over "
            "live workers.",
            labels=["verifier"],
        )
        for verifier, (busy, capacity) in self.backends.items():
            backend_busy.add_metric([verifier], busy)
            backend_capacity.add_metric([verifier], capacity)
        return [oldest, backend_busy, backend_capacity]


def _worker_tallies(all_stats: Mapping[str, Mapping[str, int]]) -> list[Metric]:
    """The metrics rebuilt from what workers tallied (:class:`Tally`), by verifier."""
    misses = CounterMetricFamily(
        "tribunal_cache_misses",
        "Cacheable items not found in the result cache, counted by the worker that scores "
        "them (hits: tribunal_cache_hits).",
        labels=["verifier"],
    )
    dead = CounterMetricFamily(
        "tribunal_dead_lettered",
        "Items moved to the dead-letter stream (answered dead_letter).",
        labels=["verifier"],
    )
    latency = HistogramMetricFamily(
        "tribunal_item_latency_seconds",
        "An item's time from enqueue to result, as its worker wrote it (queue wait and "
        "scoring; items the API answered from the cache never reach a worker).",
        labels=["verifier"],
    )
    calls = CounterMetricFamily(
        "tribunal_backend_calls",
        "LLM backend calls (each with the backend's own retries), by outcome: ok or the "
        "error class.",
        labels=["verifier", "outcome"],
    )
    call_latency = HistogramMetricFamily(
        "tribunal_backend_latency_seconds",
        "An LLM backend call's time (its wait for a concurrency slot and retries included).",
        labels=["verifier"],
    )
    rate_wait = HistogramMetricFamily(
        "tribunal_backend_rate_wait_seconds",
        "How long each LLM backend request waited for room under its requests_per_minute / "
        "tokens_per_minute limits (0 when there was room; only backends with a limit).",
        labels=["verifier"],
    )
    tokens = CounterMetricFamily(
        "tribunal_backend_tokens",
        "Tokens LLM backend calls were billed, as the server reported them, by kind (prompt "
        "or completion).",
        labels=["verifier", "kind"],
    )
    cost = CounterMetricFamily(
        "tribunal_backend_cost_usd",
        "What LLM backend calls cost (USD) at the model's prices "
        "(TRIBUNAL_<NAME>_USD_PER_MILLION_*_TOKENS; priced models only).",
        labels=["verifier"],
    )
    item_cost = HistogramMetricFamily(
        "tribunal_item_cost_usd",
        "One judged item's cost (USD): its calls' tokens at the model's prices (0 when every "
        "verdict came from the cache; priced models only; _sum to the micro-dollar per item, "
        "tribunal_backend_cost_usd_total is exact).",
        labels=["verifier"],
    )
    decided = CounterMetricFamily(
        "tribunal_claims_decided",
        "Cited claims and uncited sentences of the citation scorer's judge mode, by who "
        "decided them: extractive (every cited passage states the claim whole: the judge was "
        "not asked its support, at most its topic) or judge.",
        labels=["verifier", "by"],
    )
    inspect_dropped = CounterMetricFamily(
        "tribunal_inspect_dropped",
        "Scored items the reward inspector did not keep although sampled (its buffer full, "
        "its store failing, or a record no JSON encoder could write); results are unaffected.",
        labels=["verifier"],
    )
    for verifier, stats in all_stats.items():
        misses.add_metric([verifier], stats.get("cache_misses", 0))
        inspect_dropped.add_metric([verifier], stats.get("inspect_dropped", 0))
        dead.add_metric([verifier], stats.get("dead_lettered", 0))
        observed = histogram_from_stats(stats, "latency", LATENCY_BUCKETS_S)
        if observed is not None:
            latency.add_metric([verifier], *observed)
        observed = histogram_from_stats(stats, "backend_latency", LATENCY_BUCKETS_S)
        if observed is not None:
            call_latency.add_metric([verifier], *observed)
        observed = histogram_from_stats(stats, "backend_rate_wait", LATENCY_BUCKETS_S)
        if observed is not None:
            rate_wait.add_metric([verifier], *observed)
        observed = histogram_from_stats(stats, "item_cost", COST_BUCKETS_USD)
        if observed is not None:
            item_cost.add_metric([verifier], *observed)
        if "backend_cost_nanousd" in stats:
            cost.add_metric([verifier], stats["backend_cost_nanousd"] / 1e9)
        for name, value in stats.items():
            parts = name.split(SEP)
            if parts[0] == "backend" and len(parts) == 2:
                calls.add_metric([verifier, parts[1]], value)
            elif parts[0] == "backend_tokens" and len(parts) == 2:
                tokens.add_metric([verifier, parts[1]], value)
            elif parts[0] == "claims_decided" and len(parts) == 2:
                decided.add_metric([verifier, parts[1]], value)
    return [
        misses,
        dead,
        latency,
        calls,
        call_latency,
        rate_wait,
        tokens,
        cost,
        item_cost,
        decided,
        inspect_dropped,
    ]


def _spec_tallies(all_stats: Mapping[str, Mapping[str, int]]) -> list[Metric]:
    """The metrics rebuilt from what gateways tallied (:class:`Tally`), by reward spec."""
    spec_items = CounterMetricFamily(
        "tribunal_spec_items",
        "Reward-spec items scored, by outcome (reward or error).",
        labels=["spec", "outcome"],
    )
    spec_errors = CounterMetricFamily(
        "tribunal_spec_errors",
        "Reward-spec items answered with an error, by class.",
        labels=["spec", "code"],
    )
    rewards = HistogramMetricFamily(
        "tribunal_spec_reward",
        "Rewards given by each spec (errors excluded).",
        labels=["spec"],
    )
    squares = CounterMetricFamily(
        "tribunal_spec_reward_squares",
        "Sum of the squares of each spec's rewards: with _sum and _count, their spread.",
        labels=["spec"],
    )
    component_sum = CounterMetricFamily(
        "tribunal_spec_component_reward_sum",
        "Sum of each spec component's rewards (components with a reward).",
        labels=["spec", "component"],
    )
    component_count = CounterMetricFamily(
        "tribunal_spec_component_rewards",
        "Spec components given a reward.",
        labels=["spec", "component"],
    )
    for stats in all_stats.values():
        specs: set[str] = set()
        for name, value in stats.items():
            parts = name.split(SEP)
            if parts[0] == "spec" and len(parts) >= 3:
                specs.add(parts[1])
                if parts[2] in ("reward", "error") and len(parts) == 3:
                    spec_items.add_metric([parts[1], parts[2]], value)
                elif parts[2] == "error" and len(parts) == 4:
                    spec_errors.add_metric([parts[1], parts[3]], value)
                elif parts[2] == "squares":
                    squares.add_metric([parts[1]], value / MICRO)
                elif parts[2] == "component" and parts[-1] == "sum" and len(parts) == 5:
                    component_sum.add_metric([parts[1], parts[3]], value / MICRO)
                elif parts[2] == "component" and parts[-1] == "count" and len(parts) == 5:
                    component_count.add_metric([parts[1], parts[3]], value)
        for spec in sorted(specs):
            observed = histogram_from_stats(stats, f"spec{SEP}{spec}{SEP}rewards", REWARD_BUCKETS)
            if observed is not None:
                rewards.add_metric([spec], *observed)
    return [
        spec_items,
        spec_errors,
        rewards,
        squares,
        component_sum,
        component_count,
    ]


def _audit_tallies(all_stats: Mapping[str, Mapping[str, int]]) -> list[Metric]:
    """The audits' counters (``tribunal.gateway.audit.Auditor``), by spec: items audited,
    failed and dropped, and the sums of their training and audit rewards (the gap over any
    range is the difference of the two sums' increases over the audited items')."""
    items = CounterMetricFamily(
        "tribunal_audit_items",
        "Spec items scored again by the spec's auditor, by outcome (audited, failed, dropped).",
        labels=["spec", "outcome"],
    )
    sums = CounterMetricFamily(
        "tribunal_audit_reward",
        "Sum of the audited items' rewards, by who gave them (training: the trainer's answer; "
        "audit: the auditor's, never sent).",
        labels=["spec", "scorer"],
    )
    squares = CounterMetricFamily(
        "tribunal_audit_gap_squares",
        "Sum of the squared differences (training - audit reward) of the audited items: with "
        "the sums and the count, the gap's interval (docs/audits.md).",
        labels=["spec"],
    )
    outcomes = {"items": "audited", "failed": "failed", "dropped": "dropped"}
    scorers = {"reward": "training", "audit_reward": "audit"}
    for stats in all_stats.values():
        for name, value in stats.items():
            parts = name.split(SEP)
            if parts[0] != "audit" or len(parts) != 3:
                continue
            if parts[2] in outcomes:
                items.add_metric([parts[1], outcomes[parts[2]]], value)
            elif parts[2] in scorers:
                sums.add_metric([parts[1], scorers[parts[2]]], value / MICRO)
            elif parts[2] == "squares":
                squares.add_metric([parts[1]], value / MICRO)
    return [items, sums, squares]


def _signature_tallies(all_stats: Mapping[str, Mapping[str, int]]) -> list[Metric]:
    """The hack signatures the gateway counted (``tribunal.gateway.signatures``), by spec."""
    sums = CounterMetricFamily(
        "tribunal_spec_signature",
        "Sum of each hack signature over a spec's items (length in characters; repetition, "
        "duplicate, uncommitted, no_region, format_share, unused_tools, claim_duplicate, "
        "claim_uncited in [0, 1] per item): over a range, divided by the items, its mean.",
        labels=["spec", "signature"],
    )
    items = CounterMetricFamily(
        "tribunal_spec_signature_items",
        "Spec items whose hack signatures were counted (dropped: past the gateway's bound).",
        labels=["spec", "outcome"],
    )
    cost = CounterMetricFamily(
        "tribunal_spec_cost_usd",
        "What a spec's items spent on model calls (the sum of their components' "
        "details.usage.cost_usd: judge tokens at TRIBUNAL_JUDGE_PRICE), USD; audits charged "
        "to the auditor spec.",
        labels=["spec"],
    )
    unpriced = CounterMetricFamily(
        "tribunal_spec_cost_unpriced_items",
        "Spec items whose components made model calls with no price (their cost is missing "
        "from tribunal_spec_cost_usd_total).",
        labels=["spec"],
    )
    for stats in all_stats.values():
        for name, value in stats.items():
            parts = name.split(SEP)
            if len(parts) == 3 and parts[0] == "cost":
                if parts[2] == "usd":
                    cost.add_metric([parts[1]], value / NANO)
                elif parts[2] == "unpriced":
                    unpriced.add_metric([parts[1]], value)
            elif len(parts) == 3 and parts[0] == "sig":
                if parts[2] == "items":
                    items.add_metric([parts[1], "counted"], value)
                else:
                    scale = 1 if parts[2] == "length" else MICRO
                    sums.add_metric([parts[1], parts[2]], value / scale)
            elif len(parts) == 3 and parts[0] == "audit" and parts[2] == "signatures_dropped":
                items.add_metric([parts[1], "dropped"], value)
    return [sums, items, cost, unpriced]


class Metrics:
    """The metrics of one app.

    Args:
        verifiers: Names of the verifiers the app serves.
        worker_window_s: A worker counts as live if it sent a heartbeat within this (s).
    """

    def __init__(self, verifiers: Sequence[str], worker_window_s: float) -> None:
        self.verifiers = list(verifiers)
        self.worker_window_s = worker_window_s
        self.registry = CollectorRegistry(auto_describe=True)
        self._queue = _QueueCollector()
        self.registry.register(self._queue)
        # Shared between processes, it is read back from their files at scrape time, not
        # from this registry.
        self._shared = SHARED_DIR in os.environ
        self.request_latency = Histogram(
            "tribunal_request_latency_seconds",
            "Time to answer a scoring request (enqueue to last result).",
            labelnames=["verifier", "route"],
            buckets=LATENCY_BUCKETS_S,
            registry=None if self._shared else self.registry,
        )
        # Counted rather than logged: a line per refused request grows with traffic.
        self.request_errors = Counter(
            "tribunal_request_errors",
            "Requests answered with an error (this process), by error code: queue_full is "
            "load shed with 429 and Retry-After.",
            labelnames=["code"],
            registry=None if self._shared else self.registry,
        )

        # A trainer route's refused samples are counted here and logged by the route: the
        # trainer's own log hardly shows them (OpenRLHF logs at INFO and goes on with a reward
        # of None).
        self.trainer_refusals = Counter(
            "tribunal_trainer_samples_refused",
            "Samples a trainer route (openrlhf, slime) answered with an error (this process), "
            "by route, spec (unknown for a name not served) and error code.",
            labelnames=["route", "spec", "code"],
            registry=None if self._shared else self.registry,
        )
        # An item a trainer route could not score is answered with its spec's failed reward
        # (those trainers have no missing value): counted here, beside the answer's errors.
        self.trainer_items_failed = Counter(
            "tribunal_trainer_items_failed",
            "Items a trainer route (openrlhf, slime) answered with the spec's failed reward "
            "(this process), by route, spec and error code.",
            labelnames=["route", "spec", "code"],
            registry=None if self._shared else self.registry,
        )
        # OpenRLHF truncates a prompt longer than max_len - max_new_tokens and sends the query
        # from inside it: scored, and counted here, since the cut may hide what was asked.
        self.trainer_prompts_truncated = Counter(
            "tribunal_trainer_prompts_truncated",
            "Queries a trainer route (openrlhf) scored from a truncated prompt (this process), "
            "by route and spec.",
            labelnames=["route", "spec"],
            registry=None if self._shared else self.registry,
        )

    async def refresh(
        self, queue: JobQueue, caches: Mapping[str, ResultCache] | None = None
    ) -> None:
        """Take a snapshot of the queue's depth and oldest entry's age, live workers, their
        pools' and backends' load, counters, store sizes (and ``caches``' entries, by
        verifier) and Redis's memory."""
        self._queue.memory_used = await queue.memory_used()
        for verifier in self.verifiers:
            sizes = await queue.store_sizes(verifier)
            if caches and verifier in caches:
                sizes["cache"] = await caches[verifier].size()
            self._queue.stores[verifier] = sizes
            self._queue.depth[verifier] = await queue.depth(verifier)
            self._queue.workers[verifier] = await queue.live_workers(verifier, self.worker_window_s)
            self._queue.pools[verifier] = await queue.utilisation(verifier, self.worker_window_s)
            self._queue.backends[verifier] = await queue.backend_load(
                verifier, self.worker_window_s
            )
            oldest = await queue.oldest_entry(verifier)
            age = entry_age_s(oldest) if oldest is not None else None
            self._queue.oldest_age[verifier] = age or 0.0
            self._queue.stats[verifier] = await queue.stats(verifier)

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        if not self._shared:
            return generate_latest(self.registry)
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        registry.register(self._queue)
        return generate_latest(registry)
