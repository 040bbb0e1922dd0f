"""``tribunal.client`` against real services (real Redis, real processes: a full queue's 429,
Redis down's 503, each retried until the service has room again) and, for the exact retry
rules (how long, how often, which statuses), a tiny real HTTP server that answers what each
test scripts."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from tests.conftest import (
    ROOT,
    RedisServer,
    RunningService,
    free_port,
    redis_env,
    stop_process,
)
from tribunal.client import (
    JobNotFoundError,
    JobTimeout,
    Overloaded,
    RequestRejected,
    ServerError,
    SyncTribunalClient,
    TransportError,
    TribunalClient,
    rewards,
)
from tribunal.llm.testing import FakeOpenAIServer, FakeScript
from tribunal.wire.math import MathItem

pytestmark = pytest.mark.e2e

OK_BODY = {
    "results": [
        {
            "id": "a",
            "reward": 1.0,
            "error": None,
            "details": {},
            "verifier": {"name": "math", "version": "1", "config_hash": "0" * 16},
            "cached": False,
        }
    ]
}


class Scripted:
    """A real HTTP server on 127.0.0.1 answering a scripted list of (status, headers, body),
    then 200 with ``OK_BODY``, each answer after its delay in ``delays_s`` (none past the
    list); it records when each request arrived."""

    def __init__(
        self,
        answers: list[tuple[int, dict[str, str], dict[str, Any]]],
        port: int = 0,
        delays_s: list[float] | None = None,
    ):
        self.answers = list(answers)
        self.delays_s = list(delays_s or [])
        self.arrivals: list[float] = []
        script = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                script.arrivals.append(time.monotonic())
                if script.delays_s:
                    time.sleep(script.delays_s.pop(0))
                status, headers, body = (
                    script.answers.pop(0) if script.answers else (200, {}, OK_BODY)
                )
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    for name, value in {**headers, "Content-Type": "application/json"}.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client stopped waiting (a read timeout)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Scripted:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _error(code: str, retryable: bool) -> dict[str, Any]:
    return {"error": {"code": code, "message": code, "field": None, "retryable": retryable}}


RUBRICS = [{"text": "is kind"}]
ITEM = {"id": "a", "response": "#### 18", "ground_truth": "18"}


async def test_an_item_error_is_a_none_reward_never_0() -> None:
    failed = {
        **OK_BODY["results"][0],
        "id": "b",
        "reward": None,
        "error": {"code": "timeout", "message": "killed at 5 s", "retryable": True, "field": None},
    }
    body = {"results": [OK_BODY["results"][0], failed]}
    with Scripted([(200, {}, body)]) as server:
        async with TribunalClient(server.url) as client:
            results = await client.score("math", [ITEM, {**ITEM, "id": "b"}])
    assert rewards(results) == [1.0, None]
    assert results[1].error is not None and results[1].error.code == "timeout"


@pytest.mark.parametrize("status", [429, 503])
async def test_retries_honour_retry_after(status: int) -> None:
    answers = [(status, {"Retry-After": "1"}, _error("queue_full", True))] * 2
    with Scripted(answers) as server:
        async with TribunalClient(server.url, backoff_s=0.01) as client:
            results = await client.score("math", [ITEM])
    assert rewards(results) == [1.0]
    gaps = [b - a for a, b in zip(server.arrivals, server.arrivals[1:], strict=False)]
    assert len(server.arrivals) == 3
    assert all(gap >= 0.95 for gap in gaps), gaps  # Retry-After: 1 beat a 10 ms backoff


async def test_overloaded_after_the_last_retry() -> None:
    answers = [(503, {"Retry-After": "0"}, _error("queue_unavailable", True))] * 3
    with Scripted(answers) as server:
        async with TribunalClient(server.url, max_retries=2, backoff_s=0.01) as client:
            with pytest.raises(Overloaded) as caught:
                await client.score("math", [ITEM])
    assert caught.value.status == 503 and caught.value.code == "queue_unavailable"
    assert len(server.arrivals) == 3


@pytest.mark.parametrize("status", [400, 401, 404, 409, 413, 422])
async def test_no_retry_on_4xx(status: int) -> None:
    with Scripted([(status, {"Retry-After": "0"}, _error("bad_input", False))]) as server:
        async with TribunalClient(server.url, backoff_s=0.01) as client:
            with pytest.raises(RequestRejected) as caught:
                await client.score("math", [ITEM])
    assert caught.value.status == status
    assert len(server.arrivals) == 1


async def test_connection_errors_are_retried_until_the_server_comes_up() -> None:
    port = free_port()
    server = Scripted([], port=port)
    timer = threading.Timer(0.5, server.thread.start)
    timer.start()
    try:
        async with TribunalClient(f"http://127.0.0.1:{port}", backoff_s=0.2) as client:
            results = await client.score("math", [ITEM])
    finally:
        timer.join()
        server.__exit__()
    assert rewards(results) == [1.0]


async def test_transport_error_after_the_last_retry() -> None:
    async with TribunalClient(
        f"http://127.0.0.1:{free_port()}", max_retries=1, backoff_s=0.01
    ) as client:
        with pytest.raises(TransportError):
            await client.score("math", [ITEM])


async def test_a_read_timeout_resends_a_keyed_batch_but_not_an_unkeyed_one() -> None:
    slow = httpx.Timeout(5.0, read=0.3)
    with Scripted([], delays_s=[1.0]) as server:
        async with TribunalClient(server.url, timeout=slow, backoff_s=0.01) as client:
            with pytest.raises(TransportError, match="ReadTimeout"):
                await client.score("math", [ITEM])
    assert len(server.arrivals) == 1  # the service may be scoring it: not sent twice
    with Scripted([], delays_s=[1.0]) as server:
        async with TribunalClient(server.url, timeout=slow, backoff_s=0.01) as client:
            results = await client.score("math", [ITEM], idempotency_key="step-3")
    assert rewards(results) == [1.0] and len(server.arrivals) == 2


# -- real services -------------------------------------------------------------------------


def math_env(redis: RedisServer, prefix: str, **extra: str) -> dict[str, str]:
    return redis_env(redis, prefix, **{"TRIBUNAL_MATH_PROCESSES": "1", **extra})


@pytest.fixture
def math(
    service: Callable[..., RunningService], redis_server: RedisServer, key_prefix: str
) -> RunningService:
    return service("math", env=math_env(redis_server, key_prefix))


async def test_score_dicts_and_models_typed_results(math: RunningService) -> None:
    items = [
        ITEM,
        MathItem(id="b", response="\\boxed{\\frac{1}{2}}", ground_truth="0.5"),
        {"id": "c", "response": "I do not know", "ground_truth": "3"},
    ]
    async with math.client() as client:
        results = await client.score("math", items)
    assert [r.id for r in results] == ["a", "b", "c"]
    assert results[1].details["extracted_answer"] == "\\frac{1}{2}"
    assert results[0].verifier.name == "math"
    assert rewards(results) == [1.0, 1.0, 0.0]


async def test_a_lone_surrogate_in_an_item_is_sent_and_answered(math: RunningService) -> None:
    # UTF-8 cannot encode "\ud800" (a policy's text can hold one, e.g. a cut emoji): the
    # client sends it escaped instead of raising UnicodeEncodeError; the service names it.
    odd = {"id": "s", "response": "\ud83d #### 18", "ground_truth": "18"}
    async with math.client() as client:
        results = await client.score("math", [ITEM, odd])
    assert [r.id for r in results] == ["a", "s"]
    assert rewards(results) == [1.0, None]
    assert results[1].error is not None and results[1].error.field == "items.1.response"


async def test_a_batch_without_one_valid_item_gets_each_items_error(math: RunningService) -> None:
    # An item's fault is never the request's (issue 36); the request's shape still is.
    async with math.client() as client:
        [result] = await client.score("math", [{"id": "x", "response": "1"}])
        assert result.reward is None and result.error is not None
        assert (result.error.code, result.error.field) == ("bad_input", "items.0.ground_truth")
        with pytest.raises(RequestRejected) as caught:
            await client.score("math", [])
    assert caught.value.status == 422 and caught.value.field == "items"


@pytest.mark.slow
async def test_a_real_429_is_retried_after_its_retry_after_until_there_is_room(
    service: Callable[..., RunningService], redis_server: RedisServer, key_prefix: str
) -> None:
    running = service("math", env=math_env(redis_server, key_prefix, TRIBUNAL_MAX_QUEUE_ITEMS="4"))
    stop_process(running.processes.pop("worker0"))  # the queue fills and stays full
    waiting = [{**ITEM, "id": f"q{i}"} for i in range(4)]
    async with running.client() as client:
        await client.submit("math", waiting)
        refused = httpx.post(f"{running.base_url}/v1/math/score", json={"items": [ITEM]})
        assert refused.status_code == 429 and refused.json()["error"]["code"] == "queue_full"
        assert refused.headers["Retry-After"] == "1"
        scoring = asyncio.create_task(client.score("math", [ITEM]))
        await asyncio.sleep(1.5)  # at least one more 429 answered, and waited out
        assert not scoring.done()
        running.start_worker(0)
        results = await asyncio.wait_for(scoring, 60)
    assert rewards(results) == [1.0]


@pytest.mark.slow
async def test_a_real_503_while_redis_is_down_is_retried_until_it_is_back(
    service: Callable[..., RunningService], own_redis: RedisServer, key_prefix: str
) -> None:
    running = service("math", env=math_env(own_redis, key_prefix))
    own_redis.stop()
    refused = httpx.post(f"{running.base_url}/v1/math/score", json={"items": [ITEM]})
    assert refused.status_code == 503 and refused.json()["error"]["code"] == "queue_unavailable"
    assert refused.headers["Retry-After"] == "1"
    async with running.client() as client:
        scoring = asyncio.create_task(client.score("math", [ITEM]))
        await asyncio.sleep(1.5)
        assert not scoring.done()
        own_redis.start()
        results = await asyncio.wait_for(scoring, 60)
    assert rewards(results) == [1.0]


async def test_long_poll_waits_for_the_job(math: RunningService) -> None:
    items = [{"id": f"q{i}", "response": f"#### {i}", "ground_truth": str(i)} for i in range(40)]
    async with math.client() as client:
        job_id = await client.submit("math", items)
        state = await client.job(job_id, wait_s=30)
        assert state.status == "done" and state.completed == 40
        results = await client.wait(job_id)
        with pytest.raises(JobNotFoundError):
            await client.job("no-such-job")
    assert rewards(results) == [1.0] * 40


@pytest.mark.slow
async def test_wait_times_out_while_no_worker_runs(
    service: Callable[..., RunningService], redis_server: RedisServer, key_prefix: str
) -> None:
    running = _without_workers(service("math", env=math_env(redis_server, key_prefix)))
    async with running.client() as client:
        job_id = await client.submit("math", [ITEM])
        started = time.monotonic()
        with pytest.raises(JobTimeout) as caught:
            await client.wait(job_id, timeout_s=1.0)
        assert time.monotonic() - started >= 0.9
        assert caught.value.job_id == job_id and caught.value.completed == 0


@pytest.mark.slow
async def test_results_stream_as_they_complete(
    service: Callable[..., RunningService], redis_server: RedisServer, key_prefix: str
) -> None:
    # The fake judge answers one call at a time, 0.3 s each, and the worker takes one item
    # per read (a worker writes the results of one read together): six items take ~1.8 s,
    # so a client that waited for the whole job would see every result at the same moment.
    judge = FakeOpenAIServer(FakeScript(default_level=2), latency_s=0.3, cap=1)
    judge.start()
    try:
        env = redis_env(
            redis_server,
            key_prefix,
            TRIBUNAL_JUDGE_BASE_URL=judge.base_url,
            TRIBUNAL_CACHE_TTL_S="0",
            TRIBUNAL_WORKER_BATCH_SIZE="1",
            TRIBUNAL_WORKER_CONCURRENCY="1",
        )
        running = service("judge", env=env)
        items = [
            {
                "id": f"j{i}",
                "question": "Q?",
                "response": f"answer {i}",
                "rubrics": [{"text": "is kind"}],
            }
            for i in range(6)
        ]
        arrived: list[tuple[float, int]] = []
        async with running.client() as client:
            job_id = await client.submit("judge", items)
            async for index, result in client.iter_results(job_id):
                arrived.append((time.monotonic(), index))
                assert result.reward == 1.0
    finally:
        judge.stop()
    assert sorted(i for _, i in arrived) == list(range(6))
    assert arrived[-1][0] - arrived[0][0] >= 0.6, arrived  # yielded one by one, not at the end


_SUBMITTER = """
import sys, time
from tribunal.client import SyncTribunalClient
items = [{"id": f"q{i}", "response": f"#### {i}", "ground_truth": str(i)} for i in range(20)]
with SyncTribunalClient(sys.argv[1]) as client:
    print(client.submit("math", items, idempotency_key="run-7:chunk-0"), flush=True)
    time.sleep(600)  # killed here, before it reads a result
"""


@pytest.mark.slow
def test_a_job_is_resumed_by_its_key_after_the_client_is_killed(
    service: Callable[..., RunningService], redis_server: RedisServer, key_prefix: str
) -> None:
    running = _without_workers(service("math", env=math_env(redis_server, key_prefix)))
    child = subprocess.Popen(
        [sys.executable, "-c", _SUBMITTER, running.base_url],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert child.stdout is not None
        first_job = child.stdout.readline().strip()
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    assert first_job
    # The worker starts only now: nothing was scored while the client was alive.
    running.start_worker(0)
    items = [{"id": f"q{i}", "response": f"#### {i}", "ground_truth": str(i)} for i in range(20)]
    with SyncTribunalClient(running.base_url) as client:
        again = client.submit("math", items, idempotency_key="run-7:chunk-0")
        results = client.wait(again, timeout_s=60)
        with pytest.raises(RequestRejected) as caught:  # the key names another batch now
            client.submit("math", items[:3], idempotency_key="run-7:chunk-0")
    assert again == first_job
    assert rewards(results) == [1.0] * 20
    assert caught.value.status == 409


@pytest.mark.slow
async def test_a_keyed_score_that_times_out_names_its_job_and_is_scored_once(
    service: Callable[..., RunningService], redis_server: RedisServer, key_prefix: str
) -> None:
    env = math_env(redis_server, key_prefix, TRIBUNAL_SYNC_TIMEOUT_S="0.5")
    running = _without_workers(service("math", env=env))
    items = [{"id": f"q{i}", "response": f"#### {i}", "ground_truth": str(i)} for i in range(8)]
    async with running.client() as client:
        with pytest.raises(ServerError) as caught:
            await client.score("math", items, idempotency_key="run-8:chunk-0")
        assert caught.value.status == 504 and caught.value.job_id is not None
        running.start_worker(0)
        waited = await client.wait(caught.value.job_id, timeout_s=60)
        resent = await client.score("math", items, idempotency_key="run-8:chunk-0")
    assert rewards(resent) == rewards(waited) == [1.0] * 8
    assert resent == waited  # the resent request was answered from the same job


def _without_workers(running: RunningService) -> RunningService:
    """Stop the workers of a service that became ready (``/readyz`` wants one alive)."""
    for label in [label for label in running.processes if label.startswith("worker")]:
        stop_process(running.processes.pop(label))
    return running


def test_sync_facade_streams_too(math: RunningService) -> None:
    items = [{"id": f"q{i}", "response": f"#### {i}", "ground_truth": str(i)} for i in range(10)]
    with SyncTribunalClient(math.base_url) as client:
        assert client.ready()
        job_id = client.submit("math", items)
        seen = dict(client.iter_results(job_id))
    assert sorted(seen) == list(range(10))
    assert all(r.reward == 1.0 for r in seen.values())
