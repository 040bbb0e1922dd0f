"""Back-pressure a trainer can see: a verifier that sheds load (429, Retry-After) makes the
gateway answer 429 with Retry-After for a synchronous batch, ``tribunal.client`` retries it,
and a queued gateway job waits instead of failing.

Real processes on a real Redis: the math API and its worker (queue bound: 2 items), the
gateway API and its worker. The math worker is stopped (SIGSTOP) while a job of 2 items
fills its queue, so that math answers 429 to anything more; SIGCONT lets it drain.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx
import pytest

from tests.conftest import RedisServer, redis_env
from tribunal.client import TribunalClient
from tribunal.testing.stack import RunningService

MATH_ITEM = {"id": "a", "verifier": "math", "response": "#### 18", "ground_truth": "18"}


@dataclass
class Shedding:
    """A math service whose queue is full (its worker stopped) and a gateway in front."""

    math: RunningService
    gateway: RunningService

    def fill(self) -> None:
        """Stop the math worker and fill its queue (2 items) with a job of its own."""
        self.math.signal_group("worker0", signal.SIGSTOP)
        items = [{"id": f"f{i}", "response": f"#### {i}", "ground_truth": "1"} for i in range(2)]
        with self.math.http() as http:
            answer = http.post("/v1/jobs", json={"verifier": "math", "items": items})
            assert answer.status_code in (200, 201, 202), answer.text
            full = http.post("/v1/math/score", json={"items": items[:1]})
        assert full.status_code == 429, full.text

    def drain(self) -> None:
        """Let the math worker go on."""
        self.math.signal_group("worker0", signal.SIGCONT)


@pytest.fixture
def shedding(
    service: Callable[..., RunningService], own_redis: RedisServer, key_prefix: str
) -> Iterator[Shedding]:
    math = service(
        "math",
        env=redis_env(
            own_redis, f"{key_prefix}m", TRIBUNAL_MAX_QUEUE_ITEMS="2", TRIBUNAL_MATH_PROCESSES="1"
        ),
    )
    gateway = service(
        "gateway",
        env=redis_env(
            own_redis,
            f"{key_prefix}g",
            TRIBUNAL_GATEWAY_MATH_URL=math.base_url,
            TRIBUNAL_GATEWAY_RETRIES="0",
        ),
    )
    running = Shedding(math, gateway)
    try:
        yield running
    finally:
        running.drain()  # a stopped process group would not take SIGTERM until continued


def test_a_synchronous_batch_a_verifier_sheds_is_a_429_with_retry_after(
    shedding: Shedding,
) -> None:
    shedding.fill()
    with shedding.gateway.http() as http:
        answer = http.post("/v1/score", json={"items": [MATH_ITEM]})
        openrlhf = http.post(
            "/get_reward", json={"query": ["x"], "prompts": ["x"], "labels": ["18"]}
        )
    assert answer.status_code == 429, answer.text
    assert int(answer.headers["Retry-After"]) >= 1
    error = answer.json()["error"]
    assert error["code"] == "queue_full"
    assert error["retryable"] is True
    assert "math" in error["message"]
    # OpenRLHF's route says the same (its trainer retries a failed request).
    assert openrlhf.status_code == 429, openrlhf.text
    assert "Retry-After" in openrlhf.headers


class _Recorder(httpx.AsyncBaseTransport):
    """A real HTTP transport that records each answer's status and sets ``refused`` on the
    second 429."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.statuses: list[int] = []
        self.refused = asyncio.Event()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        self.statuses.append(response.status_code)
        if self.statuses.count(429) >= 2:
            self.refused.set()
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_the_client_honours_the_gateways_429_and_gets_its_rewards(
    shedding: Shedding,
) -> None:
    shedding.fill()
    recorder = _Recorder()
    async with TribunalClient(
        shedding.gateway.base_url, max_retries=100, backoff_max_s=1.0, transport=recorder
    ) as client:
        scoring = asyncio.create_task(client.score("gateway", [MATH_ITEM]))
        await asyncio.wait_for(recorder.refused.wait(), 120)
        assert not scoring.done()
        shedding.drain()
        results = await asyncio.wait_for(scoring, 120)
    assert [r.reward for r in results] == [1.0]
    assert results[0].error is None
    assert recorder.statuses[:2] == [429, 429]
    assert recorder.statuses[-1] == 200
    assert set(recorder.statuses) == {429, 200}
    # The gateway says what changed, once each, not once per refused request.
    log = shedding.gateway.log("api")
    assert log.count("sheds load (429)") == 2, log  # the warning, and the recovery's line
    assert log.count("math answers again") == 1, log


async def test_a_queued_gateway_job_waits_for_a_verifier_that_sheds_load(
    shedding: Shedding,
) -> None:
    shedding.fill()
    async with TribunalClient(shedding.gateway.base_url) as client:
        job_id = await client.submit("gateway", [MATH_ITEM])
        # The gateway worker has met math's 429 once math has refused more than the one
        # request fill() sent: wait for that, then let math drain.
        await _wait_for_refusals(shedding.math, at_least=2)
        state = await client.job(job_id)
        assert state.status != "done"
        shedding.drain()
        results = await client.wait(job_id, timeout_s=120)
    assert [r.reward for r in results] == [1.0]
    assert results[0].error is None


async def _wait_for_refusals(math: RunningService, at_least: int) -> None:
    """Poll math's /metrics until it has answered ``at_least`` requests with queue_full."""
    async with httpx.AsyncClient(base_url=math.base_url) as http:
        for _ in range(600):
            text = (await http.get("/metrics")).text
            if _refusals(text) >= at_least:
                return
            await asyncio.sleep(0.2)
    raise AssertionError(f"math answered fewer than {at_least} 429s:\n{text}")


def _refusals(metrics: str) -> float:
    total = 0.0
    for line in metrics.splitlines():
        if line.startswith("tribunal_request_errors_total{") and 'code="queue_full"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


@pytest.fixture
def bounded(
    service: Callable[..., RunningService], own_redis: RedisServer, key_prefix: str
) -> Iterator[Shedding]:
    """A gateway that scores at most 2 items at once in front of a math service whose worker
    is stopped (its queue unbounded here: math itself never sheds)."""
    math = service("math", env=redis_env(own_redis, f"{key_prefix}m", TRIBUNAL_MATH_PROCESSES="1"))
    gateway = service(
        "gateway",
        env=redis_env(
            own_redis,
            f"{key_prefix}g",
            TRIBUNAL_GATEWAY_MATH_URL=math.base_url,
            TRIBUNAL_GATEWAY_MAX_INFLIGHT_ITEMS="2",
        ),
    )
    running = Shedding(math, gateway)
    try:
        yield running
    finally:
        running.drain()


def _math_item(n: int) -> dict[str, object]:
    return {"id": f"i{n}", "verifier": "math", "response": f"#### {n}", "ground_truth": str(n)}


async def test_the_gateway_sheds_requests_beyond_its_items_in_flight_and_loses_none(
    bounded: Shedding,
) -> None:
    # A slow verifier: math's worker stopped, so the requests the gateway takes stay in it.
    bounded.math.signal_group("worker0", signal.SIGSTOP)
    async with httpx.AsyncClient(base_url=bounded.gateway.base_url, timeout=300) as http:
        sent = {
            asyncio.create_task(http.post("/v1/score", json={"items": [_math_item(n)]})): n
            for n in range(5)
        }
        pending = set(sent)
        refused: list[int] = []
        # Two one-item requests fit the bound of 2 and wait for math; the other three are
        # answered at once, whichever order they arrived in.
        while len(refused) < 3:
            done, pending = await asyncio.wait(
                pending, timeout=120, return_when=asyncio.FIRST_COMPLETED
            )
            assert done, f"no refusal: {len(refused)} of 5 requests refused, the rest wait"
            for task in done:
                answer = task.result()
                assert answer.status_code == 429, answer.text
                assert int(answer.headers["Retry-After"]) >= 1
                error = answer.json()["error"]
                assert error["code"] == "queue_full"
                assert error["retryable"] is True
                assert "TRIBUNAL_GATEWAY_MAX_INFLIGHT_ITEMS=2" in error["message"]
                refused.append(sent[task])
        assert len(pending) == 2
        # The trainers' routes share the bound and say the same, so that their clients retry:
        # OpenRLHF tries 5 times 1 s apart, slime 10 times with backoff.
        openrlhf = await http.post(
            "/get_reward", json={"query": ["x #### 7"], "prompts": ["x"], "labels": ["7"]}
        )
        slime = await http.post(
            "/slime/rloo_math", json={"prompt": "x", "response": "#### 7", "label": "7"}
        )
        for answer in (openrlhf, slime):
            assert answer.status_code == 429, answer.text
            assert "Retry-After" in answer.headers
        # Every refusal is counted where an operator sees load shedding.
        assert _refusals((await http.get("/metrics")).text) == 5
        bounded.drain()
        admitted = [await task for task in pending]
        assert [a.status_code for a in admitted] == [200, 200]
        # The refused requests, sent again once the line is gone, are scored: none lost.
        again = [await http.post("/v1/score", json={"items": [_math_item(n)]}) for n in refused]
        assert [a.status_code for a in again] == [200, 200, 200]
        rewards = [r["reward"] for a in admitted + again for r in a.json()["results"]]
        assert rewards == [1.0] * 5
        openrlhf = await http.post(
            "/get_reward", json={"query": ["x #### 7"], "prompts": ["x"], "labels": ["7"]}
        )
        assert openrlhf.status_code == 200, openrlhf.text
    log = bounded.gateway.log("api")
    assert "Traceback" not in log, log
