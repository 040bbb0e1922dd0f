"""An in-process LRU of verdicts, keyed by what decides a verdict.

Key: sha256 of (judge model, prompt version and digest, backend settings that move a
verdict, rubrics per call, question, response, rubric text and polarity). Only readable
verdicts are stored; errors never are. The core's result cache sits above this one and
holds whole items; this one also serves rubrics shared between items (static sets, GRPO
groups whose completions repeat) and items whose other rubrics changed.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

from tribunal.judge.verdict import ParsedVerdict


def response_digest(context: str, question: str, response: str) -> str:
    """Return the hash of everything shared by the rubrics of one response."""
    h = hashlib.sha256(context.encode())
    for part in (question, response):
        h.update(b"\x00")
        h.update(part.encode())
    return h.hexdigest()


def verdict_key(response_key: str, rubric_text: str, polarity: str) -> str:
    """Return the cache key of one rubric of one response."""
    return hashlib.sha256(f"{response_key}\x00{polarity}\x00{rubric_text}".encode()).hexdigest()


class VerdictCache:
    """A bounded LRU mapping verdict keys to verdicts (single event loop; not thread-safe).

    Args:
        max_items: Capacity; 0 disables the cache.
    """

    def __init__(self, max_items: int) -> None:
        self.max_items = max_items
        self._data: OrderedDict[str, ParsedVerdict] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._data)

    def get(self, key: str) -> ParsedVerdict | None:
        """Return the verdict under ``key`` (and mark it recently used), or None."""
        verdict = self._data.get(key)
        if verdict is None:
            self.misses += 1
            return None
        self._data.move_to_end(key)
        self.hits += 1
        return verdict

    def put(self, key: str, verdict: ParsedVerdict) -> None:
        """Store a verdict, evicting the least recently used beyond capacity."""
        if self.max_items <= 0:
            return
        self._data[key] = verdict
        self._data.move_to_end(key)
        while len(self._data) > self.max_items:
            self._data.popitem(last=False)

    def clear(self) -> None:
        """Drop every entry."""
        self._data.clear()
