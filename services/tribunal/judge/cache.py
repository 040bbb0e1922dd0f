"""An in-process LRU of verdicts, keyed by what decides a verdict.

Key (``tribunal.llm.keys.judgment_key``, canonical JSON shared with the citation judge):
(judge model, prompt version and digest, backend settings that move a verdict, rubrics per
call, question, response) as one response key, then (response key, rubric text, polarity).
Only readable verdicts are stored; errors never are. The core's result cache sits above this one and
holds whole items; this one also serves rubrics shared between items (static sets, GRPO
groups whose completions repeat) and items whose other rubrics changed.
"""

from __future__ import annotations

from collections import OrderedDict

from tribunal.judge.verdict import ParsedVerdict
from tribunal.llm.keys import judgment_key


def response_digest(context: str, question: str, response: str) -> str:
    """Return the key of everything shared by the rubrics of one response."""
    return judgment_key(
        "rubric_response", {"context": context, "question": question, "response": response}
    )


def verdict_key(response_key: str, rubric_text: str, polarity: str) -> str:
    """Return the cache key of one rubric of one response."""
    return judgment_key(
        "rubric", {"response": response_key, "polarity": polarity, "text": rubric_text}
    )


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
