"""The connection every Redis part of the queue shares, and how its failures are answered."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import OutOfMemoryError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from tribunal.core.queue.keys import Keys
from tribunal.wire.errors import ConfigurationError, QueueFull, QueueUnavailable

logger = logging.getLogger(__name__)


class RedisConnection:
    """A pool of connections to one Redis, the key names and the errors its failures raise.

    Args:
        url: Redis URL (``redis://host:port/db``).
        keys: Key names under the configured prefix.
        retry_after_s: Retry-After sent with ``QueueFull`` and ``QueueUnavailable`` (s).
        max_connections: Connections to Redis this process may hold.
        pool_timeout_s: How long a command waits for a free connection before it fails (s).
    """

    name = "redis"
    in_process = False

    def __init__(
        self,
        url: str,
        keys: Keys,
        *,
        retry_after_s: float = 1.0,
        max_connections: int = 512,
        pool_timeout_s: float = 20.0,
    ) -> None:
        self.url = url
        self.keys = keys
        self.retry_after_s = retry_after_s
        # A blocking pool: a burst of requests waits for a connection instead of failing
        # with "Too many connections" (redis-py's default pool refuses past 100). One retry
        # on a connection error, on a fresh connection: after Redis restarts, every pooled
        # connection is stale and would fail once (issue 7: 45 of 148 requests answered 503
        # after Redis was back). One only, so that a Redis that is really down is a 503 in
        # milliseconds; the submit script is idempotent, so its retry cannot enqueue twice.
        # health_check_interval PINGs a connection idle that long before using it.
        pool = aioredis.BlockingConnectionPool.from_url(
            url,
            max_connections=max_connections,
            timeout=pool_timeout_s,
            socket_connect_timeout=2.0,
            retry=Retry(ExponentialBackoff(cap=0.2, base=0.02), 1),
            retry_on_error=[RedisConnectionError, RedisTimeoutError, ConnectionResetError],
            health_check_interval=5,
            decode_responses=True,
        )
        self.redis: aioredis.Redis = aioredis.Redis.from_pool(pool)  # owns it: aclose closes it

    @contextlib.asynccontextmanager
    async def unavailable_as_503(self) -> AsyncIterator[None]:
        """Raise ``QueueFull`` for a Redis at its maxmemory, ``QueueUnavailable`` for one
        that cannot be reached."""
        try:
            yield
        except OutOfMemoryError as exc:
            # Redis at its maxmemory (noeviction): nothing is evicted, writes are refused.
            # Back-pressure, as for a full queue: finished jobs and cache entries expire.
            raise QueueFull(
                f"Redis at {self.url} is at its maxmemory and refuses writes ({exc}); retry "
                "later (operators: raise maxmemory or lower the stores' bounds, "
                "docs/operations.md)",
                retry_after_s=self.retry_after_s,
            ) from exc
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            raise QueueUnavailable(
                f"the queue is unavailable: Redis at {self.url} is not reachable ({exc})",
                retry_after_s=self.retry_after_s,
            ) from exc

    async def ping(self) -> None:
        """Raise ``QueueUnavailable`` unless Redis answers PING."""
        async with self.unavailable_as_503():
            await self.redis.ping()

    async def memory_used(self) -> int | None:
        """Redis's ``used_memory`` (bytes)."""
        async with self.unavailable_as_503():
            info = await self.redis.info("memory")
        return int(info["used_memory"])

    async def check_memory_policy(self) -> None:
        """Refuse a Redis that may evict the queue's keys.

        Any ``maxmemory-policy`` but ``noeviction`` lets Redis delete keys when it is full:
        ``allkeys-*`` any key (a stream of queued items), ``volatile-*`` keys with a TTL
        (job results still being collected). Tribunal bounds its own stores instead.

        Raises:
            ConfigurationError: The policy could evict queue keys.
            QueueUnavailable: Redis does not answer.
        """
        async with self.unavailable_as_503():
            try:
                config = await self.redis.config_get("maxmemory-policy")
            except ResponseError as exc:  # CONFIG disabled or renamed (managed Redis)
                logger.warning(
                    "could not read Redis's maxmemory-policy (%s): make sure it is noeviction",
                    exc,
                )
                return
        policy = config.get("maxmemory-policy", "noeviction")
        if policy != "noeviction":
            raise ConfigurationError(
                f"Redis at {self.url} has maxmemory-policy {policy}: when full it may evict the "
                "queue's streams and job results (queued items lost). Set maxmemory-policy "
                "noeviction (redis-server --maxmemory-policy noeviction, or CONFIG SET); "
                "Tribunal bounds its own stores (TRIBUNAL_CACHE_MAX_ITEMS, "
                "TRIBUNAL_MAX_DONE_JOBS, TRIBUNAL_MAX_DEAD_LETTERS, TRIBUNAL_MAX_QUEUE_ITEMS)"
            )

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self.redis.aclose()
