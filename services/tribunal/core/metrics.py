"""Every Prometheus metric of a service, defined once, in a registry per app.

Counters of scored items, errors by class and cache hits are cluster-wide: workers add to
them in the queue's store (a Redis hash), and any API replica reports them at scrape time,
together with the queue depth and the number of live workers. Request latency is measured by
the API process that served the request; when one ``tribunal api`` runs several processes on
one port (``TRIBUNAL_API_PROCESSES``), they share it through prometheus-client's multiprocess
mode (``PROMETHEUS_MULTIPROC_DIR``), so that a scrape, whichever process answers it, reports
every process's requests.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from tribunal.core.cache import ResultCache
from tribunal.core.queue.base import JobQueue

SHARED_DIR = "PROMETHEUS_MULTIPROC_DIR"
"""prometheus-client's variable: where processes that share their metrics keep them."""

LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class _QueueCollector(Collector):
    """Reports the last snapshot taken by :meth:`Metrics.refresh`."""

    def __init__(self) -> None:
        self.depth: dict[str, int] = {}
        self.workers: dict[str, int] = {}
        self.pools: dict[str, tuple[int, int]] = {}
        self.stats: dict[str, dict[str, int]] = {}
        self.stores: dict[str, dict[str, int]] = {}
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
        ]


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

    async def refresh(
        self, queue: JobQueue, caches: Mapping[str, ResultCache] | None = None
    ) -> None:
        """Take a snapshot of the queue's depth, live workers, counters, store sizes (and
        ``caches``' entries, by verifier) and Redis's memory."""
        self._queue.memory_used = await queue.memory_used()
        for verifier in self.verifiers:
            sizes = await queue.store_sizes(verifier)
            if caches and verifier in caches:
                sizes["cache"] = await caches[verifier].size()
            self._queue.stores[verifier] = sizes
            self._queue.depth[verifier] = await queue.depth(verifier)
            self._queue.workers[verifier] = await queue.live_workers(verifier, self.worker_window_s)
            self._queue.pools[verifier] = await queue.utilisation(verifier, self.worker_window_s)
            self._queue.stats[verifier] = await queue.stats(verifier)

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        if not self._shared:
            return generate_latest(self.registry)
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        registry.register(self._queue)
        return generate_latest(registry)
