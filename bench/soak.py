"""A soak: unique items at the machine's sustained rate, bounded in time, on a Redis whose
``maxmemory`` is small; do Redis, every process's memory and the logs stay flat?

Starts, as subprocesses on free ports (loopback): a throwaway ``redis-server`` with
``--maxmemory`` (``--redis-maxmemory-mb``, 64) and ``noeviction``, the math service
(``tribunal api math`` + one ``tribunal worker math``) and the gateway (``tribunal api
gateway`` + ``tribunal worker gateway``) on it, at ``TRIBUNAL_LOG_LEVEL=INFO``, with the
stores' bounds of a 64 MB deployment (``--cache-max-items``, ``--max-done-jobs``). Then
``--clients`` trainers, each a ``TribunalClient`` on the gateway, send batches of
``--batch`` MATH-500 items (``POST /v1/score``) back to back for ``--seconds``: every item
unique (a run nonce and a counter in its response) but one in ``--repeat-every``, which
repeats an item of an earlier batch (a cache hit). The client retries 429 with
``Retry-After``, as a trainer would.

RSS (each process with its children: the math worker's verification processes) is taken
after ``--warmup-s`` and at the end; log lines are counted over the same span. Prints one
JSON object: ``items_scored``, ``items_per_s``, ``redis_used_bytes_start`` (after warm-up)
and ``_end``, ``redis_maxmemory_bytes``, ``redis_within_bound`` (used memory within
``maxmemory``, no key evicted, every store within its setting), Redis's used memory every
5 s and its growth per million items once every store is full, ``stores`` (sizes and
bounds at the end), ``bytes_per_item`` (Redis ``MEMORY USAGE`` of a sample of each store's
keys; a queued item's from a probe stream of 1,000), ``rss_bytes`` per process at warm-up
and end, ``rss_growth_max_pct`` (Tribunal's processes: Redis grows until its stores are
full, and ``redis_within_bound`` judges it), ``log_lines_per_1000_items``,
``responses_429`` and ``errors_other_than_429``.

    .venv/bin/python bench/soak.py --seconds 600
    .venv/bin/python bench/soak.py --seconds 150 --warmup-s 30
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import psutil
import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.gateway_overhead import math500
from tribunal.client import Overloaded, TribunalClient
from tribunal.core.queue.base import QueuedItem
from tribunal.core.queue.keys import Keys
from tribunal.core.queue.redis_streams import RedisStreamsQueue
from tribunal.testing.stack import RedisServer, RunningService, start_service


class _Counting(httpx.AsyncBaseTransport):
    """A real transport that counts answers by status."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=256))
        self.statuses: dict[int, int] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        self.statuses[response.status_code] = self.statuses.get(response.status_code, 0) + 1
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


class Load:
    """The trainers' side: batches of unique items, counted."""

    def __init__(self, batch: int, repeat_every: int) -> None:
        self.nonce = uuid.uuid4().hex[:8]
        self.batch = batch
        self.repeat_every = repeat_every
        self.counter = itertools.count()
        self.recent: list[dict[str, Any]] = []
        self.scored = 0
        self.cached = 0
        self.errors: dict[str, int] = {}
        self.overloaded = 0

    def items(self) -> list[dict[str, Any]]:
        rows = math500()
        out = []
        for _ in range(self.batch):
            n = next(self.counter)
            if self.recent and n % self.repeat_every == 0:
                item = dict(self.recent[n % len(self.recent)])
            else:
                row = rows[n % len(rows)]
                item = {
                    "verifier": "math",
                    "response": f"Soak {self.nonce}, item {n}.\n{row['response']}",
                    "ground_truth": row["ground_truth"],
                }
                self.recent = [*self.recent[-255:], item]
            out.append({**item, "id": f"i{n}"})
        return out

    async def trainer(self, client: TribunalClient, until: float) -> None:
        while time.monotonic() < until:
            try:
                results = await client.score("gateway", self.items())
            except Overloaded as exc:
                if exc.status == 429:
                    self.overloaded += 1
                else:
                    self._error(f"http_{exc.status}:{exc.code}")
                continue
            except Exception as exc:  # every other failure is what the soak looks for
                self._error(type(exc).__name__)
                continue
            for result in results:
                if result.error is not None:
                    self._error(result.error.code)
                else:
                    self.scored += 1
                    self.cached += int(result.cached)

    def _error(self, code: str) -> None:
        self.errors[code] = self.errors.get(code, 0) + 1


def _rss(process: psutil.Process) -> int:
    """RSS of a process and its descendants (bytes)."""
    total = 0
    for p in [process, *process.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
    return total


def _log_lines(services: list[RunningService]) -> int:
    return sum(len(s.log(label).splitlines()) for s in services for label in s.logs)


async def _sizes(client: aioredis.Redis, prefix: str) -> dict[str, int]:
    async with client.pipeline(transaction=False) as pipe:
        pipe.zcard(f"{prefix}:cache:math:index")
        pipe.zcard(f"{prefix}:jobs:done")
        pipe.xlen(f"{prefix}:math:stream")
        pipe.xlen(f"{prefix}:gateway:stream")
        pipe.xlen(f"{prefix}:math:dead")
        cache, done, math_q, gateway_q, dead = await pipe.execute()
    return {
        "cache_entries": cache,
        "done_jobs": done,
        "queued_math": math_q,
        "queued_gateway": gateway_q,
        "dead_letters_math": dead,
    }


async def _sample(
    client: aioredis.Redis,
    prefix: str,
    load: Load,
    started: float,
    until: float,
    samples: list[dict[str, int]],
) -> None:
    """Every 5 s: items scored so far, Redis's used memory and the stores' sizes."""
    while time.monotonic() < until:
        await asyncio.sleep(5.0)
        used = int((await client.info("memory"))["used_memory"])
        samples.append(
            {
                "s": round(time.monotonic() - started),
                "items": load.scored,
                "used": used,
                **await _sizes(client, prefix),
            }
        )


def _once_full(samples: list[dict[str, int]], cache_max: int, done_max: int) -> int | None:
    """Redis bytes per million items scored from the first sample with every store at its
    bound to the last (None when the stores never filled)."""
    full = [
        s for s in samples if s["cache_entries"] >= cache_max - 1 and s["done_jobs"] >= done_max
    ]
    if len(full) < 2 or full[-1]["items"] == full[0]["items"]:
        return None
    return round(
        1e6 * (full[-1]["used"] - full[0]["used"]) / (full[-1]["items"] - full[0]["items"])
    )


async def _bytes_per_item(client: aioredis.Redis, prefix: str) -> dict[str, float]:
    """``MEMORY USAGE`` of sampled keys of each store, per item they hold."""
    out: dict[str, float] = {}
    entries = [
        k
        async for k in client.scan_iter(match=f"{prefix}:cache:math:*", count=1000)
        if not k.endswith(":index")
    ][:200]
    if entries:
        usage = [await client.memory_usage(k) or 0 for k in entries]
        index = await client.memory_usage(f"{prefix}:cache:math:index") or 0
        card = await client.zcard(f"{prefix}:cache:math:index") or 1
        out["cache_entry"] = sum(usage) / len(usage) + index / card
    jobs = await client.zrange(f"{prefix}:jobs:done", -200, -1)
    per_item = []
    for job in jobs:
        meta = await client.memory_usage(f"{prefix}:job:{job}") or 0
        results = await client.memory_usage(f"{prefix}:job:{job}:results") or 0
        total = int(await client.hget(f"{prefix}:job:{job}", "total") or 0)
        if total:
            per_item.append((meta + results) / total)
    if per_item:
        out["done_job_per_item"] = sum(per_item) / len(per_item)
        done = await client.memory_usage(f"{prefix}:jobs:done") or 0
        out["done_jobs_index_per_job"] = done / max(1, await client.zcard(f"{prefix}:jobs:done"))
    return out


async def _queued_bytes_per_item(url: str, n: int = 1000) -> float:
    """``MEMORY USAGE`` of a stream holding ``n`` queued MATH-500 items, per item (enqueued
    as the API does, under a prefix of its own, deleted afterwards)."""
    queue = RedisStreamsQueue(
        url, Keys("probe"), max_queue_items=n, result_ttl_s=60, visibility_timeout_s=60
    )
    try:
        await queue.ensure_verifier("math")
        rows = math500()
        items = [
            QueuedItem(
                i,
                {
                    "id": f"i{i}",
                    "response": rows[i % len(rows)]["response"],
                    "ground_truth": rows[i % len(rows)]["ground_truth"],
                },
                f"1:{'0' * 16}:{'0' * 64}",
            )
            for i in range(n)
        ]
        await queue.submit("math", items, total=n, prefilled={})
        usage = await queue.redis.memory_usage(queue.keys.stream("math"), samples=0) or 0
        await queue.redis.delete(*[k async for k in queue.redis.scan_iter(match="probe:*")])
        return usage / n
    finally:
        await queue.aclose()


async def soak(args: argparse.Namespace) -> dict[str, Any]:
    log_dir = Path(tempfile.mkdtemp(prefix="tribunal-soak-"))
    redis_server = RedisServer.on_free_port()
    redis_server.start()
    prefix = "soak"
    maxmemory = args.redis_maxmemory_mb * 1024 * 1024
    client = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
    await client.config_set("maxmemory", maxmemory)
    await client.config_set("maxmemory-policy", "noeviction")
    bounds = {
        "TRIBUNAL_CACHE_MAX_ITEMS": str(args.cache_max_items),
        "TRIBUNAL_MAX_DONE_JOBS": str(args.max_done_jobs),
    }
    env = {
        "TRIBUNAL_REDIS_URL": redis_server.url,
        "TRIBUNAL_QUEUE": "redis",
        "TRIBUNAL_KEY_PREFIX": prefix,
        "TRIBUNAL_LOG_LEVEL": "INFO",
        "TRIBUNAL_API_PROCESSES": "1",
        **bounds,
    }
    services: list[RunningService] = []
    try:
        math = start_service("math", env=env, log_dir=log_dir)
        services.append(math)
        gateway = start_service(
            "gateway", env={**env, "TRIBUNAL_GATEWAY_MATH_URL": math.base_url}, log_dir=log_dir
        )
        services.append(gateway)
        procs = {
            f"{s.name}-{label}": psutil.Process(p.pid)
            for s in services
            for label, p in s.processes.items()
        }
        assert redis_server.process is not None
        procs["redis"] = psutil.Process(redis_server.process.pid)
        load = Load(args.batch, args.repeat_every)
        transport = _Counting()
        started = time.monotonic()
        until = started + args.seconds
        async with TribunalClient(
            gateway.base_url, max_concurrency=args.clients, transport=transport, timeout=120
        ) as gw:
            trainers = [asyncio.create_task(load.trainer(gw, until)) for _ in range(args.clients)]
            samples: list[dict[str, int]] = []
            sampler = asyncio.create_task(_sample(client, prefix, load, started, until, samples))
            await asyncio.sleep(min(args.warmup_s, args.seconds))
            warm_items = load.scored
            warm_lines = _log_lines(services)
            warm_rss = {name: _rss(p) for name, p in procs.items()}
            warm_used = int((await client.info("memory"))["used_memory"])
            await asyncio.gather(*trainers, sampler)
        elapsed = time.monotonic() - started
        end_rss = {name: _rss(p) for name, p in procs.items()}
        end_lines = _log_lines(services)
        info = await client.info()
        sizes = await _sizes(client, prefix)
        per_item = await _bytes_per_item(client, prefix)
        per_item["queued_item"] = await _queued_bytes_per_item(redis_server.url)
        within = (
            int(info["used_memory"]) <= maxmemory
            and int(info["evicted_keys"]) == 0
            and sizes["cache_entries"] <= args.cache_max_items
            and sizes["done_jobs"] <= args.max_done_jobs
        )
        growth = {
            name: round(100.0 * (end_rss[name] - warm_rss[name]) / warm_rss[name], 1)
            for name in procs
            if warm_rss[name]
        }
        # Redis grows until its stores reach their bounds: redis_within_bound judges it.
        after_warmup = max(1, load.scored - warm_items)
        tribunal_growth = [pct for name, pct in growth.items() if name != "redis"]
        used_growth = int(info["used_memory"]) - warm_used
        return {
            "seconds": round(elapsed, 1),
            "warmup_s": args.warmup_s,
            "clients": args.clients,
            "batch": args.batch,
            "items_scored": load.scored,
            "items_cached": load.cached,
            "items_per_s": round(load.scored / elapsed, 1),
            "redis_maxmemory_bytes": maxmemory,
            "redis_used_bytes_start": warm_used,
            "redis_used_bytes_end": int(info["used_memory"]),
            "redis_used_bytes_peak": int(info["used_memory_peak"]),
            "redis_evicted_keys": int(info["evicted_keys"]),
            "redis_bytes_per_million_items_after_warmup": round(1e6 * used_growth / after_warmup),
            "redis_bytes_per_million_items_once_full": _once_full(
                samples, args.cache_max_items, args.max_done_jobs
            ),
            "redis_used_bytes_every_5s": [x["used"] for x in samples],
            "redis_within_bound": within,
            "stores": {**sizes, "bounds": bounds},
            "bytes_per_item": {k: round(v) for k, v in per_item.items()},
            "rss_bytes": {name: {"warm": warm_rss[name], "end": end_rss[name]} for name in procs},
            "rss_growth_pct": growth,
            "rss_growth_max_pct": max(tribunal_growth),
            "log_lines_after_warmup": end_lines - warm_lines,
            "log_lines_per_1000_items": round(1000.0 * (end_lines - warm_lines) / after_warmup, 3),
            "responses_by_status": transport.statuses,
            "responses_429": transport.statuses.get(429, 0),
            "errors_other_than_429": sum(load.errors.values()),
            "errors": load.errors,
        }
    finally:
        for service in reversed(services):
            service.stop()
        await client.aclose()
        redis_server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=600.0, help="Length of the soak.")
    parser.add_argument("--warmup-s", type=float, default=60.0, help="RSS and logs from here.")
    parser.add_argument("--clients", type=int, default=16, help="Concurrent trainers.")
    parser.add_argument("--batch", type=int, default=16, help="Items per request.")
    parser.add_argument("--repeat-every", type=int, default=8, help="One item in N repeats.")
    parser.add_argument("--redis-maxmemory-mb", type=int, default=64)
    parser.add_argument("--cache-max-items", type=int, default=20_000)
    parser.add_argument("--max-done-jobs", type=int, default=5_000)
    args = parser.parse_args()
    if args.seconds <= args.warmup_s:
        parser.error("--seconds must exceed --warmup-s")
    print(json.dumps(asyncio.run(soak(args)), indent=2))


if __name__ == "__main__":
    main()
