"""The gateway API's bound on items scored synchronously at once (``InFlightItems``); the
same bound through real processes is in tests/faults/test_back_pressure.py."""

from __future__ import annotations

import pytest

from tribunal.gateway.remote import InFlightItems
from tribunal.wire.errors import QueueFull


def test_items_beyond_the_bound_are_refused_with_retry_after_and_released_after() -> None:
    bound = InFlightItems(3, retry_after_s=2.0)
    with bound.admit(2):
        with bound.admit(1):
            assert bound.items == 3
            with pytest.raises(QueueFull) as refused, bound.admit(1):
                pass
            assert refused.value.retry_after_s == 2.0
            assert refused.value.http_status == 429
            assert "TRIBUNAL_GATEWAY_MAX_INFLIGHT_ITEMS=3" in refused.value.message
        with pytest.raises(QueueFull), bound.admit(2):
            pass
        with bound.admit(1):
            assert bound.items == 3
    assert bound.items == 0


def test_a_batch_larger_than_the_bound_is_taken_alone_and_a_failure_releases_it() -> None:
    bound = InFlightItems(2)
    with pytest.raises(RuntimeError), bound.admit(5):
        assert bound.items == 5
        with pytest.raises(QueueFull), bound.admit(1):
            pass
        raise RuntimeError("the verifier failed")
    assert bound.items == 0


def test_a_bound_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="bound must be >= 1"):
        InFlightItems(0)
