"""Every Redis store is bounded by a setting, on a real Redis with a small ``maxmemory``.

The result cache (``TRIBUNAL_CACHE_MAX_ITEMS`` entries, least recently used out first, kept
by Tribunal: Redis's own eviction is refused), finished jobs (``TRIBUNAL_MAX_DONE_JOBS``)
and dead letters (``TRIBUNAL_MAX_DEAD_LETTERS``, in ``test_queue_contract.py``); a Redis
whose ``maxmemory-policy`` could evict queue keys is refused at start-up with a message.
"""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
import redis.asyncio as aioredis

from tests.conftest import TRIBUNAL, RedisServer, redis_env, start_process
from tribunal.core.cache import RedisCache
from tribunal.core.queue.base import QueuedItem
from tribunal.core.queue.keys import Keys
from tribunal.core.queue.redis_streams import RedisStreamsQueue
from tribunal.testing.stack import RunningService
from tribunal.wire.errors import ConfigurationError, JobNotFound, QueueFull

MAXMEMORY = 5 * 1024 * 1024


@pytest.fixture
async def small_redis(own_redis: RedisServer) -> AsyncIterator[aioredis.Redis]:
    """This test's Redis, limited to 5 MiB, with the policy Tribunal requires."""
    client = aioredis.Redis.from_url(own_redis.url, decode_responses=True)
    await client.config_set("maxmemory", MAXMEMORY)
    await client.config_set("maxmemory-policy", "noeviction")
    yield client
    await client.aclose()


async def _count(client: aioredis.Redis, pattern: str) -> int:
    return sum([1 async for _ in client.scan_iter(match=pattern, count=1000)])


async def test_the_cache_keeps_its_most_recently_used_entries(
    own_redis: RedisServer, small_redis: aioredis.Redis, key_prefix: str
) -> None:
    keys = Keys(key_prefix)
    cache = RedisCache(small_redis, keys, "v", ttl_s=3600, max_items=4)
    await cache.set_many({f"k{i}": f"value{i}" for i in range(4)})
    assert await cache.get_many(["k0"]) == ["value0"]  # k0 is now the most recently used
    await cache.set_many({"k4": "value4", "k5": "value5"})
    assert await cache.get_many([f"k{i}" for i in range(6)]) == [
        "value0",
        None,
        None,
        "value3",
        "value4",
        "value5",
    ]
    assert await cache.size() == 4
    assert await _count(small_redis, f"{key_prefix}:cache:v:*") == 4 + 1  # and the index


async def test_finished_jobs_beyond_the_cap_are_deleted_with_their_idempotency_key(
    own_redis: RedisServer, key_prefix: str
) -> None:
    queue = RedisStreamsQueue(
        own_redis.url,
        Keys(key_prefix),
        max_queue_items=100,
        result_ttl_s=3600,
        visibility_timeout_s=5,
        max_done_jobs=3,
    )
    await queue.ensure_verifier("v")
    try:
        jobs = []
        for n in range(5):
            item = QueuedItem(0, {"id": f"i{n}"}, None)
            submitted = await queue.submit(
                "v", [item], total=1, prefilled={}, idempotency_key=f"key{n}", request_hash="h"
            )
            jobs.append(submitted.job_id)
            [delivery] = await queue.claim("v", "c", 1, block_s=0.1)
            await queue.complete("v", [(delivery, '{"id":"x"}')])
        # A job answered from the cache alone is finished at submission: it counts too.
        prefilled = await queue.submit("v", [], total=1, prefilled={0: '{"id":"p"}'})
        jobs.append(prefilled.job_id)
        for old in jobs[:3]:
            with pytest.raises(JobNotFound):
                await queue.job(old)
        for kept in jobs[3:]:
            assert (await queue.job(kept)).is_done
        assert (await queue.store_sizes("v"))["done_jobs"] == 3
        # The key of a deleted job names no job any more: the batch makes a new one.
        again = await queue.submit(
            "v", [], total=1, prefilled={0: "{}"}, idempotency_key="key0", request_hash="h"
        )
        assert again.created and again.job_id != jobs[0]
        assert await _count(queue.redis, f"{key_prefix}:job:*") <= 2 * 3
    finally:
        await queue.aclose()


async def test_a_full_redis_is_back_pressure_and_still_serves_the_cache(
    own_redis: RedisServer, small_redis: aioredis.Redis, key_prefix: str
) -> None:
    keys = Keys(key_prefix)
    queue = RedisStreamsQueue(
        own_redis.url, keys, max_queue_items=10, result_ttl_s=60, visibility_timeout_s=5
    )
    cache = RedisCache(queue.redis, keys, "v", ttl_s=60, max_items=10)
    await queue.ensure_verifier("v")
    await cache.set_many({"k": "value"})
    await small_redis.config_set("maxmemory", 1)
    try:
        with pytest.raises(QueueFull, match="maxmemory"):
            await queue.submit("v", [QueuedItem(0, {"id": "a"}, None)], total=1, prefilled={})
        assert await cache.get_many(["k", "other"]) == ["value", None]
        assert await queue.depth("v") == 0
    finally:
        await small_redis.config_set("maxmemory", MAXMEMORY)
        await queue.aclose()


@pytest.mark.parametrize("policy", ["allkeys-lru", "volatile-ttl"])
async def test_a_redis_that_could_evict_queue_keys_is_refused(
    own_redis: RedisServer, small_redis: aioredis.Redis, key_prefix: str, policy: str
) -> None:
    await small_redis.config_set("maxmemory-policy", policy)
    queue = RedisStreamsQueue(
        own_redis.url,
        Keys(key_prefix),
        max_queue_items=10,
        result_ttl_s=60,
        visibility_timeout_s=5,
    )
    try:
        with pytest.raises(ConfigurationError, match=f"maxmemory-policy {policy}.*noeviction"):
            await queue.check_memory_policy()
    finally:
        await queue.aclose()


@pytest.mark.slow
def test_the_api_and_the_worker_refuse_to_start_on_an_evicting_redis(
    own_redis: RedisServer, key_prefix: str, tmp_path: Path
) -> None:
    import redis

    redis.Redis.from_url(own_redis.url).config_set("maxmemory-policy", "allkeys-lru")
    env = redis_env(own_redis, key_prefix)
    for label, argv in {
        "api": [*TRIBUNAL, "api", "math", "--port", "0"],
        "worker": [*TRIBUNAL, "worker", "math", "--workers", "1"],
    }.items():
        log = tmp_path / f"{label}.log"
        process = start_process(argv, env, log)
        try:
            code = process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
        text = log.read_text()
        assert code != 0, text
        assert "maxmemory-policy allkeys-lru" in text, text
        assert "noeviction" in text


@pytest.mark.slow
async def test_a_long_stream_of_unique_items_keeps_every_store_in_bound(
    service: Callable[..., RunningService],
    own_redis: RedisServer,
    small_redis: aioredis.Redis,
    key_prefix: str,
) -> None:
    bounds = {"TRIBUNAL_CACHE_MAX_ITEMS": "300", "TRIBUNAL_MAX_DONE_JOBS": "20"}
    math = service(
        "math", env=redis_env(own_redis, key_prefix, TRIBUNAL_MATH_PROCESSES="1", **bounds)
    )
    batches, size = 60, 50
    async with math.client(timeout=120) as client:
        last: list[dict[str, str]] = []
        for b in range(batches):
            last = [
                {"id": f"{b}-{i}", "response": f"#### {b * size + i}", "ground_truth": str(i)}
                for i in range(size)
            ]
            results = await client.score("math", last)
            # Every item scored: none lost, none an error.
            assert [r.id for r in results] == [item["id"] for item in last]
            assert all(r.error is None and r.reward is not None for r in results)
        # The most recent items are still in the cache: their batch again is all hits.
        again = await client.score("math", last)
    assert all(r.cached for r in again)
    assert [r.reward for r in again] == [r.reward for r in results]
    assert await small_redis.zcard(f"{key_prefix}:cache:math:index") <= 300
    assert await _count(small_redis, f"{key_prefix}:cache:math:*") <= 300 + 1
    assert await small_redis.zcard(f"{key_prefix}:jobs:done") <= 20
    assert await _count(small_redis, f"{key_prefix}:job:*") <= 2 * 20
    assert await small_redis.xlen(f"{key_prefix}:math:stream") == 0
    info = await small_redis.info()
    assert info["evicted_keys"] == 0
    assert info["used_memory"] <= MAXMEMORY
    metrics = httpx.get(f"{math.base_url}/metrics", timeout=30).text
    assert 'tribunal_store_items{store="cache",verifier="math"}' in metrics
    assert "tribunal_redis_used_memory_bytes" in metrics
    cache_line = next(
        line
        for line in metrics.splitlines()
        if line.startswith('tribunal_store_items{store="cache"')
    )
    assert float(cache_line.rsplit(" ", 1)[1]) <= 300
