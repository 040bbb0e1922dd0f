"""The result cache: identical inputs under the same verifier version are scored once.

Keys are (verifier, version, config hash, sha256 of the item's cache payload); the id and
group of an item are not part of it, so the identical completions of a GRPO group share one
entry. Only scored outcomes are cached, never errors (an error may not recur).
"""

from __future__ import annotations

import contextlib
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Protocol

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from tribunal.core.errors import QueueUnavailable
from tribunal.core.hashing import sha256_hex
from tribunal.core.queue.keys import Keys


def cache_entry(version: str, config_hash: str, payload: Any) -> str:
    """Return the cache entry name of an item: ``<version>:<config hash>:<input sha256>``."""
    return f"{version}:{config_hash}:{sha256_hex(payload)}"


class ResultCache(Protocol):
    """A store of item outcomes (JSON strings) by cache key."""

    async def get_many(self, keys: Sequence[str]) -> list[str | None]:
        """Return the cached value of each key, or None."""
        ...

    async def set_many(self, values: Mapping[str, str]) -> None:
        """Store values (with the configured lifetime)."""
        ...


class RedisCache:
    """``ResultCache`` in Redis: MGET and SET EX, shared by every replica.

    Args:
        redis: The client (shared with the queue).
        keys: Key names.
        verifier: Verifier name (part of every key).
        ttl_s: Lifetime of an entry (s).
    """

    def __init__(self, redis: aioredis.Redis, keys: Keys, verifier: str, ttl_s: int) -> None:
        self.redis = redis
        self.keys = keys
        self.verifier = verifier
        self.ttl_s = ttl_s

    async def get_many(self, keys: Sequence[str]) -> list[str | None]:
        """MGET the entries."""
        if not keys:
            return []
        async with _redis_errors():
            values: list[Any] = await self.redis.mget(
                [self.keys.cache(self.verifier, k) for k in keys]
            )
        return values

    async def set_many(self, values: Mapping[str, str]) -> None:
        """SET EX each entry in one pipeline."""
        if not values:
            return
        async with _redis_errors(), self.redis.pipeline(transaction=False) as pipe:
            for key, value in values.items():
                pipe.set(self.keys.cache(self.verifier, key), value, ex=self.ttl_s)
            await pipe.execute()


@contextlib.asynccontextmanager
async def _redis_errors() -> AsyncIterator[None]:
    try:
        yield
    except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
        raise QueueUnavailable(
            f"the result cache is unavailable: Redis is not reachable ({exc})", retry_after_s=1.0
        ) from exc


class MemoryCache:
    """``ResultCache`` in this process: an LRU of ``max_items`` entries with a lifetime.

    Args:
        max_items: Entries kept; the least recently used go first.
        ttl_s: Lifetime of an entry (s).
    """

    def __init__(self, max_items: int, ttl_s: int) -> None:
        self.max_items = max_items
        self.ttl_s = ttl_s
        self._entries: OrderedDict[str, tuple[float, str]] = OrderedDict()

    async def get_many(self, keys: Sequence[str]) -> list[str | None]:
        """Return live entries, refreshing their recency."""
        now = time.monotonic()
        out: list[str | None] = []
        for key in keys:
            entry = self._entries.get(key)
            if entry is None or entry[0] < now:
                self._entries.pop(key, None)
                out.append(None)
            else:
                self._entries.move_to_end(key)
                out.append(entry[1])
        return out

    async def set_many(self, values: Mapping[str, str]) -> None:
        """Store entries, evicting the oldest beyond ``max_items``."""
        expires = time.monotonic() + self.ttl_s
        for key, value in values.items():
            self._entries[key] = (expires, value)
            self._entries.move_to_end(key)
        while len(self._entries) > self.max_items:
            self._entries.popitem(last=False)


class NoCache:
    """``ResultCache`` that stores nothing (``TRIBUNAL_CACHE_TTL_S=0``)."""

    async def get_many(self, keys: Sequence[str]) -> list[str | None]:
        """Miss every key."""
        return [None] * len(keys)

    async def set_many(self, values: Mapping[str, str]) -> None:
        """Drop the values."""
