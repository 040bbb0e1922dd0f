"""Issue 7, defect 12: a dead worker's items are reclaimed at the rate a worker scores, and a
worker that gives up writing results says so."""

from __future__ import annotations

import asyncio
import logging

import pytest

from tests.conftest import RedisServer, free_port
from tests.core.toy import ToyItem, ToyVerifier
from tribunal.core.cache import NoCache
from tribunal.core.queue.base import Delivery, QueuedItem
from tribunal.core.queue.keys import Keys
from tribunal.core.queue.redis_streams import RedisStreamsQueue
from tribunal.core.worker import WorkerRuntime


async def test_a_dead_workers_backlog_is_reclaimed_batch_after_batch(
    redis_server: RedisServer, key_prefix: str
) -> None:
    queue = RedisStreamsQueue(
        redis_server.url,
        Keys(key_prefix),
        max_queue_items=100,
        result_ttl_s=60,
        visibility_timeout_s=1.0,
    )
    try:
        await queue.ensure_verifier("v")
        await queue.submit(
            "v", [QueuedItem(i, {"id": str(i)}) for i in range(12)], total=12, prefilled={}
        )
        assert len(await queue.claim("v", "dead", 12, block_s=0.1)) == 12
        await asyncio.sleep(1.1)  # the dead worker's entries are now idle past the timeout
        taken = []
        for _ in range(4):  # back to back, well inside one quarter of the visibility timeout
            taken += await queue.claim("v", "alive", 3, block_s=0.01)
        assert len(taken) == 12 and all(d.deliveries == 2 for d in taken)
    finally:
        await queue.aclose()


async def test_a_worker_that_gives_up_writing_results_logs_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Redis is away for good: nothing listens on this port.
    queue = RedisStreamsQueue(
        f"redis://127.0.0.1:{free_port()}/0",
        Keys("t"),
        max_queue_items=10,
        result_ttl_s=60,
        visibility_timeout_s=5,
    )
    runtime = WorkerRuntime(ToyVerifier(), queue, NoCache(), write_attempts=2)
    item = ToyItem(id="a", text="aa").model_dump()
    delivery = Delivery("1-0", "j" * 32, 0, item, None, 1)
    try:
        with caplog.at_level(logging.ERROR, logger="tribunal.core.worker"):
            await runtime.process([delivery])
    finally:
        await queue.aclose()
    assert "gave up writing 1 results of toy after 2 attempts" in caplog.text
