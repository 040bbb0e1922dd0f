"""Per-minute request and token limits of an LLM backend (``tribunal.llm.limits``): waited
for, shared through a real Redis, refused when set where they mean nothing. Counts and order
only: a wait is seen as a refused ask, never timed."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from pydantic import ValidationError

from tribunal.core.metrics import Tally
from tribunal.llm import BackendConfig, CompletionRequest
from tribunal.llm.limits import (
    LocalLimiter,
    RateLimits,
    RedisLimiter,
    estimate_tokens,
    limit_key_stem,
    meter_limits,
    share_limits,
)
from tribunal.llm.openai_compat import OpenAICompatBackend
from tribunal.llm.testing import FakeOpenAIServer, FakeScript
from tribunal.wire.errors import QueueUnavailable


@pytest.fixture
async def clients(redis_server: Any) -> AsyncIterator[list[aioredis.Redis]]:
    """Two clients of one Redis: two workers' connections."""
    pair = [aioredis.from_url(redis_server.url, decode_responses=True) for _ in range(2)]
    yield pair
    for client in pair:
        await client.aclose()


def counted(limiter: RedisLimiter, refusals: list[int]) -> None:
    """Append 1 to ``refusals`` each time the limiter's script refuses an admission."""
    script = limiter._acquire

    async def ask(**kwargs: Any) -> Any:
        answer = await script(**kwargs)
        if not int(answer[0]):
            refusals.append(1)
        return answer

    limiter._acquire = ask  # type: ignore[method-assign]


async def until(condition: Any) -> None:
    while not condition():
        await asyncio.sleep(0.01)


def test_limits_must_be_positive_and_need_an_openai_server() -> None:
    with pytest.raises(ValidationError, match="requests_per_minute"):
        BackendConfig(kind="openai", base_url="http://x/v1", model="m", requests_per_minute=0)
    with pytest.raises(ValidationError, match="tokens_per_minute"):
        BackendConfig(kind="openai", base_url="http://x/v1", model="m", tokens_per_minute=-5)
    with pytest.raises(ValidationError, match="the transformers backend makes none"):
        BackendConfig(kind="transformers", model="m", tokens_per_minute=1000)
    with pytest.raises(ValidationError, match="requests_per_minute"):
        BackendConfig(kind="openai", base_url="http://x/v1", model="m", requests_per_minute="x")
    ok = BackendConfig(kind="openai", base_url="http://x/v1", model="m", requests_per_minute=5)
    assert ok.requests_per_minute == 5
    assert "requests_per_minute" not in ok.hash_payload()  # a capacity knob moves no verdict


def test_the_estimate_counts_prompt_characters_by_four_and_the_completion_budget() -> None:
    messages = [{"role": "system", "content": "abcd"}, {"role": "user", "content": "abcde"}]
    assert estimate_tokens(messages, 100) == 3 + 100


def test_one_backend_shares_one_window_whichever_service_calls_it() -> None:
    a = limit_key_stem("p", "http://h:8000/v1/", "m")
    assert a == limit_key_stem("p", "http://h:8000/v1", "m")
    assert a != limit_key_stem("p", "http://h:8000/v1", "other")
    assert a.startswith("p:llm:")


async def test_two_workers_share_one_request_limit(clients: list[aioredis.Redis]) -> None:
    stem = f"t{uuid.uuid4().hex[:8]}:llm:x"
    limits = RateLimits(requests=3)
    refusals: list[int] = []
    limiters = [RedisLimiter(c, stem, limits) for c in clients]
    for limiter in limiters:
        counted(limiter, refusals)
    tasks = [asyncio.create_task(limiter.acquire(1)) for limiter in limiters for _ in range(4)]
    # Every call has asked once; the 5 beyond the limit were refused and are waiting.
    await until(lambda: len(refusals) >= 5)
    assert sum(task.done() for task in tasks) == 3
    assert await clients[0].zcard(f"{stem}:admitted") == 3
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_refused_call_is_admitted_once_the_oldest_leaves_the_window(
    clients: list[aioredis.Redis],
) -> None:
    stem = f"t{uuid.uuid4().hex[:8]}:llm:x"
    limits = RateLimits(requests=1, window_s=0.2)
    tally = Tally()
    first, second = (RedisLimiter(c, stem, limits, tally) for c in clients)
    refusals: list[int] = []
    counted(second, refusals)
    seconds, micros = await clients[0].time()
    started_ms = seconds * 1000 + micros // 1000
    await first.acquire(1)
    await second.acquire(1)  # waits for the first's admission to leave the window
    assert len(refusals) >= 1
    ((_, admitted_ms),) = await clients[0].zrange(f"{stem}:admitted", 0, -1, withscores=True)
    assert admitted_ms - started_ms >= 200  # on Redis's clock: a window after the first
    stats = tally.take()
    assert stats["backend_rate_wait|count"] == 2


async def test_tokens_are_limited_and_settled_to_the_reported_usage(
    clients: list[aioredis.Redis],
) -> None:
    stem = f"t{uuid.uuid4().hex[:8]}:llm:x"
    limits = RateLimits(tokens=100)
    one, other = (RedisLimiter(c, stem, limits) for c in clients)
    refusals: list[int] = []
    counted(other, refusals)
    ticket = await one.acquire(60)
    waiting = asyncio.create_task(other.acquire(60))
    await until(lambda: len(refusals) >= 1)
    assert not waiting.done()
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    await one.settle(ticket, 30)  # the server billed 30, not the estimated 60
    assert await clients[0].get(f"{stem}:tokens") == "30"
    await other.acquire(60)  # 30 + 60 fits in 100
    assert await clients[0].get(f"{stem}:tokens") == "90"


async def test_a_call_larger_than_the_token_limit_is_admitted_into_an_empty_window(
    clients: list[aioredis.Redis],
) -> None:
    limiter = RedisLimiter(clients[0], f"t{uuid.uuid4().hex[:8]}:llm:x", RateLimits(tokens=10))
    await limiter.acquire(500)
    assert await clients[0].zcard(f"{limiter.keys[0]}") == 1


async def test_the_local_limiter_waits_in_process() -> None:
    limiter = LocalLimiter(RateLimits(requests=2, tokens=50, window_s=60))
    await limiter.acquire(10)
    await limiter.acquire(10)
    third = asyncio.create_task(limiter.acquire(10))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert not third.done()
    third.cancel()
    await asyncio.gather(third, return_exceptions=True)
    small = LocalLimiter(RateLimits(tokens=50, window_s=0.05))
    ticket = await small.acquire(40)
    await small.settle(ticket, 5)
    await small.acquire(40)  # 5 + 40 fits once settled
    assert small._used == 45
    await small.acquire(40)  # waits for the window to pass
    assert small._used == 40


async def test_a_backend_waits_for_room_before_its_request_reaches_the_server(
    clients: list[aioredis.Redis],
) -> None:

    server = FakeOpenAIServer(FakeScript())
    server.start()
    config = BackendConfig(
        kind="openai", base_url=server.base_url, model="m", requests_per_minute=2
    )
    backend = OpenAICompatBackend(config)
    assert isinstance(backend.limiter, LocalLimiter)  # one process's until shared
    tally = Tally()
    meter_limits(backend, tally)
    share_limits(backend, clients[0], f"t{uuid.uuid4().hex[:8]}")
    assert isinstance(backend.limiter, RedisLimiter)
    refusals: list[int] = []
    counted(backend.limiter, refusals)
    request = CompletionRequest(
        messages=[{"role": "user", "content": "x"}],
        schema={"type": "object", "properties": {}},
        max_tokens=4,
    )
    try:
        await backend.start()
        calls = [asyncio.create_task(backend.complete(request)) for _ in range(3)]
        await until(lambda: sum(c.done() for c in calls) == 2 and len(refusals) >= 1)
        assert len(server.stats.requests) == 2  # the third waits on this side of the socket
        for call in calls:
            call.cancel()
        await asyncio.gather(*calls, return_exceptions=True)
        assert tally.take()["backend_rate_wait|count"] == 2
    finally:
        await backend.aclose()
        server.stop()


def test_a_backend_without_limits_has_no_limiter_to_share() -> None:

    backend = OpenAICompatBackend(BackendConfig(kind="openai", base_url="http://x/v1", model="m"))
    share_limits(backend, object(), "p")
    assert backend.limiter is None


async def test_a_redis_that_does_not_answer_fails_the_call_retryably_before_it_is_made() -> None:
    client = aioredis.from_url("redis://127.0.0.1:1", decode_responses=True)
    limiter = RedisLimiter(client, "t:llm:x", RateLimits(requests=5))
    with pytest.raises(QueueUnavailable, match="the call was not made") as caught:
        await limiter.acquire(1)
    assert caught.value.retryable
    await client.aclose()
