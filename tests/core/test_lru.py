"""The one in-process LRU (``core.lru``) under the result, verdict and claim-judgment caches."""

from __future__ import annotations

from tribunal.core.lru import LRU


def test_the_least_recently_used_goes_first_and_a_read_counts_as_a_use() -> None:
    lru: LRU[str, int] = LRU(2)
    lru.put("a", 1)
    lru.put("b", 2)
    assert lru.get("a") == 1  # a is now the most recently used
    lru.put("c", 3)
    assert (lru.get("a"), lru.get("b"), lru.get("c"), len(lru)) == (1, None, 3, 2)


def test_a_rewrite_refreshes_an_entry_and_keeps_one_copy() -> None:
    lru: LRU[str, int] = LRU(2)
    lru.put("a", 1)
    lru.put("b", 2)
    lru.put("a", 10)
    lru.put("c", 3)
    assert (lru.get("a"), lru.get("b"), len(lru)) == (10, None, 2)


def test_an_entry_past_its_lifetime_is_gone_and_dropped_when_read() -> None:
    now = [100.0]
    lru: LRU[str, str] = LRU(10, ttl_s=5, clock=lambda: now[0])
    lru.put("a", "x")
    now[0] += 5
    assert lru.get("a") == "x"  # alive through its last second
    now[0] += 0.5
    assert len(lru) == 1
    assert lru.get("a") is None and len(lru) == 0


def test_a_bound_of_zero_keeps_nothing() -> None:
    lru: LRU[str, int] = LRU(0)
    lru.put("a", 1)
    assert lru.get("a") is None and len(lru) == 0
