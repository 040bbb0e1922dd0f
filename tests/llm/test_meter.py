"""``BackendMeter``: LLM calls counted by outcome, timed, and in flight while they wait."""

from __future__ import annotations

import asyncio

import pytest

from tribunal.llm.base import Completion, CompletionRequest
from tribunal.llm.meter import BackendMeter
from tribunal.wire.errors import BackendUnavailable, ScoringTimeout

REQUEST = CompletionRequest(messages=[{"role": "user", "content": "?"}], schema={}, max_tokens=8)


class Gated:
    """A backend whose calls wait for a gate, then answer or raise what they are told."""

    kind = "test"
    model = "gated"
    control_tokens = ()

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.raises: list[Exception] = []

    async def start(self) -> None:
        pass

    async def aclose(self) -> None:
        pass

    async def complete(self, request: CompletionRequest) -> Completion:
        await self.gate.wait()
        if self.raises:
            raise self.raises.pop()
        return Completion(text="{}")


async def test_calls_are_counted_by_outcome_and_in_flight_until_answered() -> None:
    backend, meter = Gated(), BackendMeter(bound=4)
    backend.raises = [BackendUnavailable("down"), ScoringTimeout("slow")]
    calls = [asyncio.create_task(meter.complete(backend, REQUEST)) for _ in range(3)]
    await asyncio.sleep(0)
    assert meter.load() == (3, 4)  # the gated backend keeps no count of its own
    backend.gate.set()
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    assert sorted(type(o).__name__ for o in outcomes) == [
        "BackendUnavailable",
        "Completion",
        "ScoringTimeout",
    ]
    assert meter.load() == (0, 4)
    stats = meter.tally.take()
    assert stats["backend|ok"] == 1
    assert stats["backend|backend_unavailable"] == 1 and stats["backend|timeout"] == 1
    assert stats["backend_latency|count"] == 3


def test_a_backend_that_counts_its_own_calls_in_flight_is_believed() -> None:
    class Counting(Gated):
        in_flight = 2

    assert BackendMeter(bound=8).load(Counting()) == (2, 8)


async def test_an_exception_of_another_kind_is_an_internal_error() -> None:
    backend, meter = Gated(), BackendMeter(bound=1)
    backend.gate.set()
    backend.raises = [RuntimeError("bug")]
    with pytest.raises(RuntimeError):
        await meter.complete(backend, REQUEST)
    stats = meter.tally.take()
    assert "backend|ok" not in stats and stats["backend|internal_error"] == 1


async def test_a_call_cancelled_with_its_batch_is_not_counted() -> None:
    backend, meter = Gated(), BackendMeter(bound=1)
    call = asyncio.create_task(meter.complete(backend, REQUEST))
    await asyncio.sleep(0)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert meter.load() == (0, 1) and meter.tally.take() == {}
