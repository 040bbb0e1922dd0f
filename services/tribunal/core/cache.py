"""The result cache: identical inputs under the same verifier version are scored once.

Keys are (verifier, version, config hash, sha256 of the item's cache payload); the id and
group of an item are not part of it, so the identical completions of a GRPO group share one
entry. Only scored outcomes are cached, never errors (an error may not recur).

Both caches hold at most ``TRIBUNAL_CACHE_MAX_ITEMS`` entries per verifier, least recently
used out first. In Redis that bound is kept by Tribunal itself, not by Redis's eviction: the
queue shares the server, and a server-wide policy that could evict a cache entry could evict
a queued item too (Redis must run ``maxmemory-policy noeviction``; see ``queue.factory``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Protocol

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import OutOfMemoryError
from redis.exceptions import TimeoutError as RedisTimeoutError

from tribunal.core.lru import LRU
from tribunal.core.queue.keys import Keys
from tribunal.wire.errors import QueueUnavailable
from tribunal.wire.hashing import sha256_hex


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

    async def size(self) -> int:
        """Entries held now (for ``/metrics``)."""
        ...


# A hit refreshes the entry's place in the recency index (ZADD XX: never adds a member whose
# entry was evicted meanwhile).
_GET = """
local index, now = KEYS[1], ARGV[1]
local values = redis.call('MGET', unpack(KEYS, 2))
for i, value in ipairs(values) do
  if value then redis.call('ZADD', index, 'XX', now, KEYS[i + 1]) end
end
return values
"""

# Evict first (DEL and ZPOPMIN free memory and are allowed when Redis is at its maxmemory),
# then write: the index and the entries never hold more than max_items between them.
_SET = """
local index, max_items, ttl, now = KEYS[1], tonumber(ARGV[1]), ARGV[2], ARGV[3]
local n = #KEYS - 1
local over = redis.call('ZCARD', index) + n - max_items
if over > 0 then
  local evicted = redis.call('ZPOPMIN', index, over)
  for i = 1, #evicted, 2 do redis.call('DEL', evicted[i]) end
end
for i = 1, n do
  redis.call('SET', KEYS[i + 1], ARGV[i + 3], 'EX', ttl)
  redis.call('ZADD', index, now, KEYS[i + 1])
end
return over
"""


class RedisCache:
    """``ResultCache`` in Redis, shared by every replica: a string per entry (with a TTL) and
    a sorted set per verifier that indexes the entries by last use, so that at most
    ``max_items`` entries exist and the least recently used one goes first.

    Each read and each write is one script (one round trip). An entry that expired by its
    TTL leaves its index member behind until it is evicted; it still counts towards
    ``max_items``, so the bound holds for entries and index alike.

    Args:
        redis: The client (shared with the queue).
        keys: Key names.
        verifier: Verifier name (part of every key).
        ttl_s: Lifetime of an entry (s).
        max_items: Entries kept at most (``TRIBUNAL_CACHE_MAX_ITEMS``); a batch larger than
            this stores only its last ``max_items`` entries.
    """

    def __init__(
        self, redis: aioredis.Redis, keys: Keys, verifier: str, ttl_s: int, max_items: int
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.verifier = verifier
        self.ttl_s = ttl_s
        self.max_items = max_items
        self._get = redis.register_script(_GET)
        self._set = redis.register_script(_SET)

    async def get_many(self, keys: Sequence[str]) -> list[str | None]:
        """Return each entry (None when absent) and mark the hits as used now."""
        if not keys:
            return []
        names = [self.keys.cache_index(self.verifier)]
        names += [self.keys.cache(self.verifier, k) for k in keys]
        async with _redis_errors():
            try:
                values: list[Any] = await self._get(keys=names, args=[time.time()])
            except OutOfMemoryError:
                # Redis at its maxmemory refuses the recency update: serve the hits anyway.
                values = await self.redis.mget(names[1:])
        return [None if v is None or v is False else v for v in values]

    async def set_many(self, values: Mapping[str, str]) -> None:
        """Store the entries, evicting the least recently used beyond ``max_items``."""
        if not values or self.max_items == 0:
            return
        kept = list(values.items())[-self.max_items :]
        names = [self.keys.cache_index(self.verifier)]
        names += [self.keys.cache(self.verifier, k) for k, _ in kept]
        args: list[Any] = [self.max_items, self.ttl_s, time.time(), *(v for _, v in kept)]
        async with _redis_errors():
            await self._set(keys=names, args=args)

    async def size(self) -> int:
        """Entries indexed now (the ones that expired by TTL but are not evicted yet
        included): at most ``max_items``."""
        async with _redis_errors():
            return int(await self.redis.zcard(self.keys.cache_index(self.verifier)))


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
        self._entries: LRU[str, str] = LRU(max_items, ttl_s)

    async def get_many(self, keys: Sequence[str]) -> list[str | None]:
        """Return live entries, refreshing their recency."""
        return [self._entries.get(key) for key in keys]

    async def set_many(self, values: Mapping[str, str]) -> None:
        """Store entries, evicting the least recently used beyond ``max_items``."""
        for key, value in values.items():
            self._entries.put(key, value)

    async def size(self) -> int:
        """Entries held now (expired ones not yet dropped included)."""
        return len(self._entries)


class NoCache:
    """``ResultCache`` that stores nothing (``TRIBUNAL_CACHE_TTL_S=0``)."""

    async def get_many(self, keys: Sequence[str]) -> list[str | None]:
        """Miss every key."""
        return [None] * len(keys)

    async def set_many(self, values: Mapping[str, str]) -> None:
        """Drop the values."""

    async def size(self) -> int:
        """Always 0."""
        return 0
