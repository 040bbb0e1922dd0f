"""One bounded least-recently-used map, with an optional lifetime per entry.

The in-process caches (the core's result cache, the judge's verdicts, the citation judge's
claim judgments) are each this map with their own keys and values.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRU(Generic[K, V]):
    """At most ``max_items`` entries; reading or writing an entry makes it the most recently
    used, and past the bound the least recently used goes. One event loop or thread: not
    thread-safe.

    Args:
        max_items: Entries kept; 0 (or less) keeps none.
        ttl_s: Lifetime of an entry from its last write (s); None: entries live until evicted.
            An expired entry is dropped when read, and counts in ``len`` until then.
        clock: Time source for ``ttl_s`` (s, monotonic).
    """

    def __init__(
        self,
        max_items: int,
        ttl_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_items = max_items
        self.ttl_s = ttl_s
        self._clock = clock
        # value and the time it expires (inf without a lifetime)
        self._entries: OrderedDict[K, tuple[V, float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        """Return the live value under ``key`` (marked recently used), or None."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        value, expires = entry
        if expires < self._clock():
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        """Store ``value`` under ``key``, evicting the least recently used past the bound."""
        if self.max_items <= 0:
            return
        expires = float("inf") if self.ttl_s is None else self._clock() + self.ttl_s
        self._entries[key] = (value, expires)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_items:
            self._entries.popitem(last=False)
