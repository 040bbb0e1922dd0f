"""A verifier that does nothing, to measure the queue alone."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from typing import Any

from tribunal.core.cache import NoCache
from tribunal.core.queue.base import QueuedItem
from tribunal.core.queue.keys import Keys
from tribunal.core.queue.redis_streams import RedisStreamsQueue
from tribunal.core.worker import WorkerRuntime
from tribunal.wire.envelope import ItemOutcome, ScoreItem


class NoopItem(ScoreItem):
    """An item with nothing to score."""


class NoopVerifier:
    """Rewards every item 1.0 at once."""

    name = "noop"
    version = "1"
    item_model: type[ScoreItem] = NoopItem

    def config_hash(self) -> str:
        return "0" * 16

    def cache_payload(self, item: ScoreItem) -> dict[str, Any] | None:
        return None

    async def start(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

    async def score(self, items: Sequence[ScoreItem]) -> list[ItemOutcome]:
        return [NOOP] * len(items)


NOOP = ItemOutcome(reward=1.0)


def _queue(redis_url: str, prefix: str) -> RedisStreamsQueue:
    return RedisStreamsQueue(
        redis_url,
        Keys(prefix),
        max_queue_items=1_000_000,
        result_ttl_s=600,
        visibility_timeout_s=30,
    )


async def run_noop_worker(redis_url: str, prefix: str) -> None:
    """Run a worker of the noop verifier until killed."""
    queue = _queue(redis_url, prefix)
    runtime = WorkerRuntime(NoopVerifier(), queue, NoCache(), batch_size=256, concurrency=4)
    await runtime.run(asyncio.Event())


async def submit_and_wait(redis_url: str, prefix: str, n_items: int, job_size: int) -> float:
    """Submit ``n_items`` in jobs of ``job_size`` and return items/s until all are done."""
    queue = _queue(redis_url, prefix)
    await queue.ensure_verifier("noop")
    jobs = []
    started = time.perf_counter()
    for _ in range(0, n_items, job_size):
        items = [QueuedItem(i, {"id": f"{uuid.uuid4().hex[:8]}"}) for i in range(job_size)]
        jobs.append((await queue.submit("noop", items, total=job_size, prefilled={})).job_id)
    for job_id in jobs:
        record = await queue.wait(job_id, 120)
        assert record.is_done, f"job {job_id} not done"
    elapsed = time.perf_counter() - started
    await queue.aclose()
    return n_items / elapsed
