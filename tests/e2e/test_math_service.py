"""The math service as real processes: ``tribunal api`` + ``tribunal worker`` + a real Redis."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator

import httpx
import pytest

from tests.conftest import DATA, RedisServer, RunningService, need_data, redis_env, shared_service
from tribunal.client import SyncTribunalClient

pytestmark = pytest.mark.e2e


def math500(n: int) -> list[dict[str, str]]:
    with need_data(DATA / "math" / "math500_test.jsonl").open() as f:
        rows = [json.loads(line) for line in f][:n]
    return [{"response": r["solution"], "ground_truth": r["answer"]} for r in rows]


def env_for(redis: RedisServer, prefix: str, **extra: str) -> dict[str, str]:
    return redis_env(redis, prefix, **{"TRIBUNAL_MATH_PROCESSES": "1", **extra})


@pytest.fixture(scope="module")
def math_service(
    request: pytest.FixtureRequest, redis_server: RedisServer
) -> Iterator[RunningService]:
    """The math service with the default settings, for the tests that only score through it."""
    env = env_for(redis_server, f"m{uuid.uuid4().hex[:10]}")
    with shared_service(request, "math", env=env) as running:
        yield running


def test_the_readme_curl_example(math_service: RunningService) -> None:
    running = math_service
    body = {
        "items": [
            {
                "id": "q1",
                "response": "so the answer is \\boxed{\\frac{1}{2}}",
                "ground_truth": "0.5",
            }
        ]
    }
    with running.http() as client:
        response = client.post("/v1/math/score", json=body)
    assert response.status_code == 200
    [result] = response.json()["results"]
    assert result["id"] == "q1" and result["reward"] == 1.0 and result["error"] is None
    assert result["details"]["extracted_answer"] == "\\frac{1}{2}"
    assert result["verifier"]["name"] == "math" and result["cached"] is False


def test_a_worker_killed_mid_batch_loses_and_duplicates_nothing(
    service: Callable[..., RunningService], redis_server: RedisServer, key_prefix: str
) -> None:
    env = env_for(
        redis_server,
        key_prefix,
        TRIBUNAL_VISIBILITY_TIMEOUT_S="2",
        TRIBUNAL_WORKER_HEARTBEAT_S="0.5",
        TRIBUNAL_WORKER_BATCH_SIZE="4",
        TRIBUNAL_WORKER_CONCURRENCY="1",
        TRIBUNAL_CACHE_TTL_S="0",
    )
    running = service("math", workers=2, env=env)
    items = [{"id": f"q{i}", **item} for i, item in enumerate(math500(500) * 2)]
    with SyncTribunalClient(running.base_url) as client:
        job_id = client.submit("math", items)
        while client.job(job_id).completed < 40:
            time.sleep(0.02)
        victim = running.processes["worker0"]
        os.killpg(victim.pid, signal.SIGKILL)  # the worker and its verification processes
        victim.wait()
        results = client.wait(job_id, timeout_s=60)
    assert [r.id for r in results] == [item["id"] for item in items]
    assert all(r.reward == 1.0 for r in results), [r for r in results if r.reward != 1.0][:3]


def test_redis_down_gives_503_and_the_service_recovers(
    service: Callable[..., RunningService], own_redis: RedisServer, key_prefix: str
) -> None:
    running = service("math", env=env_for(own_redis, key_prefix))
    body = {"items": [{"id": "q", "response": "#### 7", "ground_truth": "7"}]}
    with running.http() as client:
        assert client.post("/v1/math/score", json=body).json()["results"][0]["reward"] == 1.0
        own_redis.stop()
        down = client.post("/v1/math/score", json=body)
        assert down.status_code == 503
        error = down.json()["error"]
        assert error["code"] == "queue_unavailable" and error["retryable"] is True
        assert "Redis" in error["message"] and down.headers["retry-after"]
        assert client.get("/healthz").status_code == 200
        assert client.get("/readyz").status_code == 503
        own_redis.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            again = client.post("/v1/math/score", json=body)
            if again.status_code == 200:
                break
            time.sleep(0.5)
        assert again.status_code == 200 and again.json()["results"][0]["reward"] == 1.0
    assert all(p.poll() is None for p in running.processes.values()), running.log_text()


def test_one_pathological_item_does_not_hold_up_the_other_99(
    service: Callable[..., RunningService], redis_server: RedisServer, key_prefix: str
) -> None:
    env = env_for(
        redis_server, key_prefix, TRIBUNAL_MATH_TIMEOUT_S="2", TRIBUNAL_MATH_PROCESSES="2"
    )
    running = service("math", env=env)
    items = [{"id": f"q{i}", **item} for i, item in enumerate(math500(98))]
    items.insert(40, {"id": "tower", "response": "\\boxed{9^{9^{9^{9^{9}}}}}", "ground_truth": "1"})
    items.insert(
        70, {"id": "huge", "response": "The answer is 42. " + "x" * 1_000_000, "ground_truth": "42"}
    )
    started = time.monotonic()
    with running.http() as client:
        response = client.post("/v1/math/score", json={"items": items})
    elapsed = time.monotonic() - started
    results = {r["id"]: r for r in response.json()["results"]}
    assert results["tower"]["reward"] is None
    assert results["tower"]["error"]["code"] == "timeout" and results["tower"]["error"]["retryable"]
    assert results["huge"]["reward"] == 1.0
    others = [r for i, r in results.items() if i not in {"tower", "huge"}]
    assert len(others) == 98 and all(r["reward"] == 1.0 for r in others)
    # two deadlines (the tower's chunk's, then its own alone) plus the batch's own work
    assert elapsed < 2 * 2 + 10, elapsed
    with running.http() as client:
        metrics = client.get("/metrics").text
    assert 'tribunal_pool_capacity{verifier="math"} 2.0' in metrics, metrics
    assert 'tribunal_pool_busy{verifier="math"}' in metrics


def test_bad_input_is_named_over_real_http(
    service: Callable[..., RunningService], redis_server: RedisServer, key_prefix: str
) -> None:
    running = service("math", env=env_for(redis_server, key_prefix, TRIBUNAL_MAX_BATCH_ITEMS="5"))
    with running.http() as client:
        # One bad item is that item's result (issue 36), even alone in its batch.
        for item, field in (
            ({"id": "q", "response": "1"}, "items.0.ground_truth"),
            ({"id": "q", "response": 1, "ground_truth": "1"}, "items.0.response"),
        ):
            answer = client.post("/v1/math/score", json={"items": [item]})
            assert answer.status_code == 200, answer.text
            [result] = answer.json()["results"]
            assert result["reward"] is None and result["error"]["field"] == field
        cases = [
            ({"items": []}, 422, "items"),
            (
                {"items": [{"id": str(i), "response": "1", "ground_truth": "1"} for i in range(6)]},
                413,
                "items",
            ),
        ]
        for body, status, field in cases:
            response = client.post("/v1/math/score", json=body)
            assert response.status_code == status, body
            assert response.json()["error"]["field"] == field
        not_json = client.post(
            "/v1/math/score", content=b"{", headers={"content-type": "application/json"}
        )
        assert not_json.status_code == 422 and not_json.json()["error"]["code"] == "bad_input"
        with pytest.raises(httpx.HTTPStatusError):
            client.get("/v1/jobs/unknown").raise_for_status()


def test_a_burst_of_concurrent_requests_all_get_answers(math_service: RunningService) -> None:
    """More concurrent requests than redis-py's default pool (100 connections) holds."""
    running = math_service

    async def burst() -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=300)
        async with httpx.AsyncClient(
            base_url=running.base_url, timeout=120, limits=limits
        ) as client:
            return await asyncio.gather(
                *(
                    client.post(
                        "/v1/math/score",
                        json={
                            "items": [
                                {
                                    "id": f"q{i}",
                                    "response": f"\\boxed{{{i}}}",
                                    "ground_truth": str(i),
                                }
                            ]
                        },
                    )
                    for i in range(300)
                )
            )

    responses = asyncio.run(burst())
    assert [r.status_code for r in responses] == [200] * 300
    assert all(r.json()["results"][0]["reward"] == 1.0 for r in responses)
