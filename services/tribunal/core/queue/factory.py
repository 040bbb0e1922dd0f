"""The factories that pick a queue backend and the cache that goes with it."""

from __future__ import annotations

import logging

from tribunal.core.cache import MemoryCache, NoCache, RedisCache, ResultCache
from tribunal.core.queue.base import JobQueue
from tribunal.core.queue.keys import Keys
from tribunal.core.queue.memory import MemoryQueue
from tribunal.core.queue.redis_streams import RedisStreamsQueue
from tribunal.core.settings import CoreSettings
from tribunal.wire.errors import ConfigurationError, QueueUnavailable

logger = logging.getLogger(__name__)


def redis_queue(settings: CoreSettings) -> RedisStreamsQueue:
    """Build the Redis Streams queue described by ``settings`` (no connection made yet)."""
    return RedisStreamsQueue(
        settings.redis_url,
        Keys(settings.key_prefix),
        max_queue_items=settings.max_queue_items,
        result_ttl_s=settings.result_ttl_s,
        visibility_timeout_s=settings.visibility_timeout_s,
        max_done_jobs=settings.max_done_jobs,
        max_dead_letters=settings.max_dead_letters,
    )


def memory_queue(settings: CoreSettings) -> MemoryQueue:
    """Build the embedded queue described by ``settings``."""
    return MemoryQueue(
        max_queue_items=settings.max_queue_items,
        result_ttl_s=settings.result_ttl_s,
        visibility_timeout_s=settings.visibility_timeout_s,
        max_dead_letters=settings.max_dead_letters,
    )


async def build_queue(settings: CoreSettings) -> JobQueue:
    """Return the queue ``settings.queue`` asks for.

    A Redis URL that was named (``TRIBUNAL_REDIS_URL``, or ``queue=redis``) is never replaced
    by the embedded queue: when Redis does not answer yet, the Redis queue is returned all the
    same, requests answer 503 ``queue_unavailable`` and ``/readyz`` 503 until it comes, and
    nothing accepted is lost on the next restart. Only ``auto`` with no URL named falls back
    to the embedded queue, when nothing answers at the default URL, and says so.

    Raises:
        ConfigurationError: Redis answers with a ``maxmemory-policy`` that could evict the
            queue's keys (anything but ``noeviction``).
    """
    if settings.queue == "memory":
        logger.warning(
            "queue: embedded (TRIBUNAL_QUEUE=memory): single host, nothing survives a restart"
        )
        return memory_queue(settings)
    queue = redis_queue(settings)
    try:
        await queue.ping()
    except QueueUnavailable as exc:
        if settings.redis_named:
            logger.warning("queue: Redis at %s (%s); waiting for it", settings.redis_url, exc)
            return queue
        await queue.aclose()
        logger.warning(
            "queue: embedded: no Redis configured (TRIBUNAL_REDIS_URL unset) and none answers "
            "at %s; single host, nothing survives a restart",
            settings.redis_url,
        )
        return memory_queue(settings)
    try:
        await queue.check_memory_policy()
    except ConfigurationError:
        await queue.aclose()
        raise
    logger.info("queue: Redis at %s", settings.redis_url)
    return queue


def build_cache(settings: CoreSettings, queue: JobQueue, verifier: str) -> ResultCache:
    """Return the result cache that goes with ``queue``: Redis beside Redis, else in memory."""
    if settings.cache_ttl_s == 0:
        return NoCache()
    if isinstance(queue, RedisStreamsQueue):
        return RedisCache(
            queue.redis, queue.keys, verifier, settings.cache_ttl_s, settings.cache_max_items
        )
    return MemoryCache(settings.cache_max_items, settings.cache_ttl_s)
