"""``BackendMeter``: LLM calls counted by outcome, timed, and in flight while they wait."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from tribunal.llm.base import Completion, CompletionRequest
from tribunal.llm.config import BackendConfig
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


class Billing:
    """A backend whose every call reports 1,000 prompt and 200 completion tokens."""

    kind = "test"
    model = "billing"
    control_tokens = ()

    async def start(self) -> None:
        pass

    async def aclose(self) -> None:
        pass

    async def complete(self, request: CompletionRequest) -> Completion:
        return Completion(text="{}", prompt_tokens=1000, completion_tokens=200)


PRICED = BackendConfig(
    kind="openai",
    base_url="http://x/v1",
    model="m",
    price={"prompt": 2.0, "completion": 8.0},
)


async def test_a_priced_model_counts_tokens_and_their_cost() -> None:
    meter = BackendMeter(bound=4, config=PRICED)
    for _ in range(3):
        await meter.complete(Billing(), REQUEST)
    meter.charge_item(3000, 600)  # the three calls were one item's
    stats = meter.tally.take()
    assert stats["backend_tokens|prompt"] == 3000
    assert stats["backend_tokens|completion"] == 600
    # 1,000 x $2 / M + 200 x $8 / M = $0.0036 a call, in billionths of a dollar.
    assert stats["backend_cost_nanousd"] == 3 * 3_600_000
    assert stats["item_cost|count"] == 1
    assert stats["item_cost|le|0.1"] == 1  # $0.0108 falls in (0.01, 0.1]


async def test_an_unpriced_model_counts_tokens_and_no_cost() -> None:
    meter = BackendMeter(bound=4, config=BackendConfig(kind="openai", base_url="http://x/v1"))
    await meter.complete(Billing(), REQUEST)
    meter.charge_item(1000, 200)
    stats = meter.tally.take()
    assert stats["backend_tokens|prompt"] == 1000
    assert not any(name.startswith(("backend_cost", "item_cost")) for name in stats)


def test_a_price_names_both_kinds_of_token_and_neither_is_negative() -> None:
    with pytest.raises(ValidationError, match=r"price\.completion"):
        BackendConfig(price={"prompt": 1.0})
    with pytest.raises(ValidationError, match=r"price\.prompt"):
        BackendConfig(price={"prompt": -1.0, "completion": 1.0})
    with pytest.raises(ValidationError, match=r"price\.output"):
        BackendConfig(price={"prompt": 1.0, "completion": 1.0, "output": 1.0})
    free = BackendConfig(price='{"prompt": 0, "completion": 0}')  # the environment's form
    assert free.cost_usd(10, 10) == 0.0
    assert BackendConfig().cost_usd(10, 10) is None
    assert "price" not in PRICED.hash_payload()
