"""The factories that pick a queue backend and the cache that goes with it."""

from __future__ import annotations

import logging

from tribunal.core.cache import MemoryCache, NoCache, RedisCache, ResultCache
from tribunal.core.errors import ConfigurationError, QueueUnavailable
from tribunal.core.queue.base import JobQueue
from tribunal.core.queue.keys import Keys
from tribunal.core.queue.memory import MemoryQueue
from tribunal.core.queue.redis_streams import RedisStreamsQueue
from tribunal.core.settings import CoreSettings

logger = logging.getLogger(__name__)


def redis_queue(settings: CoreSettings) -> RedisStreamsQueue:
    """Build the Redis Streams queue described by ``settings`` (no connection made yet)."""
    return RedisStreamsQueue(
        settings.redis_url,
        Keys(settings.key_prefix),
        max_queue_items=settings.max_queue_items,
        result_ttl_s=settings.result_ttl_s,
        visibility_timeout_s=settings.visibility_timeout_s,
    )


def memory_queue(settings: CoreSettings) -> MemoryQueue:
    """Build the embedded queue described by ``settings``."""
    return MemoryQueue(
        max_queue_items=settings.max_queue_items,
        result_ttl_s=settings.result_ttl_s,
        visibility_timeout_s=settings.visibility_timeout_s,
    )


async def build_queue(settings: CoreSettings) -> JobQueue:
    """Return the queue ``settings.queue`` asks for.

    ``auto`` pings Redis once: Redis when it answers, else the embedded queue (logged).

    Raises:
        ConfigurationError: ``queue=redis`` and Redis does not answer.
    """
    if settings.queue == "memory":
        return memory_queue(settings)
    queue = redis_queue(settings)
    try:
        await queue.ping()
    except QueueUnavailable as exc:
        await queue.aclose()
        if settings.queue == "redis":
            raise ConfigurationError(str(exc)) from exc
        logger.warning("no Redis at %s: using the embedded queue", settings.redis_url)
        return memory_queue(settings)
    return queue


def build_cache(settings: CoreSettings, queue: JobQueue, verifier: str) -> ResultCache:
    """Return the result cache that goes with ``queue``: Redis beside Redis, else in memory."""
    if settings.cache_ttl_s == 0:
        return NoCache()
    if isinstance(queue, RedisStreamsQueue):
        return RedisCache(queue.redis, queue.keys, verifier, settings.cache_ttl_s)
    return MemoryCache(settings.cache_max_items, settings.cache_ttl_s)
