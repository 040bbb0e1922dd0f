"""The HTTP app through ``httpx.ASGITransport``: envelope, errors, limits, jobs, auth, health."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from tests.core.toy import ToyVerifier, toy_spec
from tribunal.code.session_api import SESSION_RESPONSES
from tribunal.core.app import create_app
from tribunal.core.settings import CoreSettings
from tribunal.gateway.routes import SCORE_RESPONSES
from tribunal.wire import errors


async def client_for(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://tribunal") as client:
            yield client


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    settings = CoreSettings(queue="memory", max_batch_items=10, max_request_bytes=4096)
    async for c in client_for(create_app(toy_spec(ToyVerifier()), settings)):
        yield c


async def test_score_answers_each_item_in_request_order(client: httpx.AsyncClient) -> None:
    items = [{"id": "b", "text": "aa"}, {"id": "a", "text": "xyz"}]
    response = await client.post("/v1/toy/score", json={"items": items})
    assert response.status_code == 200
    results = response.json()["results"]
    assert [r["id"] for r in results] == ["b", "a"]
    assert [r["reward"] for r in results] == [1.0, 0.0]
    assert results[0]["verifier"] == {"name": "toy", "version": "1", "config_hash": "0" * 16}
    assert results[0]["error"] is None and results[0]["cached"] is False


async def test_one_bad_item_fails_itself_and_the_rest_is_scored(client: httpx.AsyncClient) -> None:
    items = [{"id": "ok", "text": "a"}, {"id": "broken", "text": 3}, {"id": "x", "txt": "a"}]
    response = await client.post("/v1/toy/score", json={"items": items})
    assert response.status_code == 200
    ok, broken, misspelt = response.json()["results"]
    assert ok["reward"] == 1.0
    assert broken["id"] == "broken" and broken["reward"] is None
    assert broken["error"]["code"] == "bad_input" and broken["error"]["field"] == "items.1.text"
    assert misspelt["error"]["field"] in {"items.2.text", "items.2.txt"}


@pytest.mark.parametrize(
    "items",
    [[{"id": "q"}], [{"id": "q", "text": ["not", "a", "string"]}, {"id": "r"}]],
)
async def test_a_batch_with_nothing_valid_answers_each_items_error(
    client: httpx.AsyncClient, items: list[dict[str, object]]
) -> None:
    # An item's fault is never the request's (issue 36): a one-item batch gets its result.
    for path, body in (
        ("/v1/toy/score", {"items": items}),
        ("/v1/jobs", {"verifier": "toy", "items": items}),
    ):
        response = await client.post(path, json=body)
        assert response.status_code in (200, 202), response.text
        if path == "/v1/jobs":
            job = response.json()["job_id"]
            response = await client.get(f"/v1/jobs/{job}", params={"wait": 5})
            assert response.json()["status"] == "done"
        results = response.json()["results"]
        assert [r["reward"] for r in results] == [None] * len(items)
        assert [r["error"]["field"] for r in results] == [
            f"items.{i}.text" for i in range(len(items))
        ]
        assert all(r["error"]["code"] == "bad_input" for r in results)


@pytest.mark.parametrize(
    ("body", "field"),
    [({"items": []}, "items"), ({}, "items"), ({"items": "nope"}, "items")],
)
async def test_a_request_of_the_wrong_shape_is_refused_naming_the_field(
    client: httpx.AsyncClient, body: dict[str, object], field: str
) -> None:
    response = await client.post("/v1/toy/score", json=body)
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "bad_input" and error["field"] == field
    assert field in error["message"]


async def test_oversize_batches_get_413(client: httpx.AsyncClient) -> None:
    many = [{"id": str(i), "text": "a"} for i in range(11)]
    response = await client.post("/v1/toy/score", json={"items": many})
    assert response.status_code == 413
    assert response.json()["error"]["field"] == "items"
    assert "TRIBUNAL_MAX_BATCH_ITEMS" in response.json()["error"]["message"]

    big = [{"id": "1", "text": "a" * 5000}]
    response = await client.post("/v1/toy/score", json={"items": big})
    assert response.status_code == 413
    assert "TRIBUNAL_MAX_REQUEST_BYTES" in response.json()["error"]["message"]


async def test_streamed_oversize_body_gets_413(client: httpx.AsyncClient) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"items": [{"id": "1", "text": "'
        for _ in range(10):
            yield b"a" * 1000
        yield b'"}]}'

    response = await client.post(
        "/v1/toy/score", content=chunks(), headers={"content-type": "application/json"}
    )
    assert response.status_code == 413


async def test_jobs_long_poll_and_idempotency(client: httpx.AsyncClient) -> None:
    body = {"verifier": "toy", "items": [{"id": "q", "text": "ae"}], "idempotency_key": "k1"}
    created = await client.post("/v1/jobs", json=body)
    assert created.status_code == 202 and created.json()["created"] is True
    job_id = created.json()["job_id"]
    again = await client.post("/v1/jobs", json=body)
    assert again.json() == {"job_id": job_id, "created": False}
    conflict = await client.post("/v1/jobs", json={**body, "items": [{"id": "q", "text": "zz"}]})
    assert conflict.status_code == 409
    assert conflict.json()["error"]["field"] == "idempotency_key"

    state = (await client.get(f"/v1/jobs/{job_id}", params={"wait": 5})).json()
    assert state["status"] == "done" and state["completed"] == state["total"] == 1
    assert state["results"][0]["reward"] == 1.0

    missing = await client.get("/v1/jobs/nope")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "job_not_found"
    wrong = await client.post(
        "/v1/jobs", json={**body, "verifier": "math", "idempotency_key": None}
    )
    assert wrong.status_code == 422 and wrong.json()["error"]["field"] == "verifier"
    bad_item = await client.post("/v1/jobs", json={"verifier": "toy", "items": [{"id": 1}]})
    assert bad_item.status_code == 202, bad_item.text
    job = (await client.get(f"/v1/jobs/{bad_item.json()['job_id']}", params={"wait": 5})).json()
    assert job["results"][0]["error"]["field"] == "items.0.id"


async def test_sync_score_with_an_idempotency_key_scores_a_resent_batch_once() -> None:
    verifier = ToyVerifier()
    settings = CoreSettings(queue="memory", cache_ttl_s=0)
    async for client in client_for(create_app(toy_spec(verifier), settings)):
        body = {"items": [{"id": "q", "text": "ae"}, {"id": "r", "text": "zz"}]}
        key = {"idempotency-key": "chunk-3"}
        first = await client.post("/v1/toy/score", json=body, headers=key)
        again = await client.post("/v1/toy/score", json=body, headers=key)
        assert first.status_code == again.status_code == 200
        assert again.json() == first.json()
        assert [r["reward"] for r in first.json()["results"]] == [1.0, 0.0]
        assert len(verifier.calls) == 1  # the resent batch was answered from its job
        job = await client.post(
            "/v1/jobs", json={"verifier": "toy", **body, "idempotency_key": "chunk-3"}
        )
        assert job.json()["created"] is False  # one key space with /v1/jobs

        conflict = await client.post(
            "/v1/toy/score", json={"items": [{"id": "q", "text": "x"}]}, headers=key
        )
        assert conflict.status_code == 409
        assert conflict.json()["error"]["code"] == "idempotency_conflict"
        too_long = await client.post(
            "/v1/toy/score", json=body, headers={"idempotency-key": "k" * 257}
        )
        assert too_long.status_code == 422
        assert "idempotency-key" in too_long.json()["error"]["field"]


async def test_bodies_orjson_refuses_get_the_answer_json_gives(
    client: httpx.AsyncClient,
) -> None:
    # NaN is no JSON, but Python's json reads it: the item fails its own schema as before.
    body = b'{"items": [{"id": "a", "text": NaN}, {"id": "b", "text": "aa"}]}'
    headers = {"content-type": "application/json"}
    response = await client.post("/v1/toy/score", content=body, headers=headers)
    assert response.status_code == 200
    bad, good = response.json()["results"]
    assert bad["error"]["field"] == "items.0.text" and good["reward"] == 1.0
    broken = await client.post("/v1/toy/score", content=b'{"items": [}', headers=headers)
    assert broken.status_code == 422
    assert broken.json()["error"]["message"].startswith("body: invalid JSON at line 1 column 12")


async def test_health_ready_and_metrics(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    ready = await client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["checks"]["queue"] == "memory"
    await client.post(
        "/v1/toy/score", json={"items": [{"id": "1", "text": "bad"}, {"id": "2", "text": "a"}]}
    )
    await client.post("/v1/toy/score", json={"items": [{"id": "3", "text": "a"}]})
    text = (await client.get("/metrics")).text
    assert 'tribunal_item_errors_total{code="bad_input",verifier="toy"} 1.0' in text
    assert 'tribunal_items_scored_total{outcome="reward",verifier="toy"} 1.0' in text
    assert 'tribunal_cache_hits_total{verifier="toy"} 1.0' in text
    assert 'tribunal_queue_depth{verifier="toy"} 0.0' in text
    assert 'tribunal_request_latency_seconds_count{route="score",verifier="toy"} 2.0' in text
    # Items 1 and 2 missed the cache at submission and were scored; their worker wrote each
    # result with its latency from enqueue. Item 3, a hit, never reached a worker.
    assert 'tribunal_cache_misses_total{verifier="toy"} 2.0' in text
    assert 'tribunal_item_latency_seconds_count{verifier="toy"} 2.0' in text
    assert 'tribunal_item_latency_seconds_bucket{le="+Inf",verifier="toy"} 2.0' in text
    assert 'tribunal_queue_oldest_age_seconds{verifier="toy"} 0.0' in text


async def test_bearer_token_is_required_when_configured() -> None:
    settings = CoreSettings(queue="memory", api_key="s3cret")
    async for client in client_for(create_app(toy_spec(ToyVerifier()), settings)):
        body = {"items": [{"id": "1", "text": "a"}]}
        refused = await client.post("/v1/toy/score", json=body)
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
        wrong = await client.post("/v1/toy/score", json=body, headers={"authorization": "Bearer x"})
        assert wrong.status_code == 401
        ok = await client.post(
            "/v1/toy/score", json=body, headers={"authorization": "Bearer s3cret"}
        )
        assert ok.status_code == 200
        assert (await client.get("/healthz")).status_code == 200


@pytest.mark.slow
async def test_sync_score_timeout_names_the_job_to_poll() -> None:
    class Slow(ToyVerifier):
        async def score(self, items):  # type: ignore[no-untyped-def]
            import asyncio

            await asyncio.sleep(2)
            return await super().score(items)

    settings = CoreSettings(queue="memory", sync_timeout_s=0.2)
    async for client in client_for(create_app(toy_spec(Slow()), settings)):
        response = await client.post("/v1/toy/score", json={"items": [{"id": "1", "text": "a"}]})
        assert response.status_code == 504
        error = response.json()["error"]
        assert error["code"] == "timeout" and error["retryable"] is True
        assert "/v1/jobs/" in error["message"]


def test_every_error_class_has_a_code_a_status_and_an_openapi_entry() -> None:
    app = create_app(toy_spec(ToyVerifier()), CoreSettings(queue="memory"))
    declared = app.openapi()["paths"]["/v1/toy/score"]["post"]["responses"]
    codes = set()
    for cls in errors.ALL_ERRORS:
        assert cls.code and 400 <= cls.http_status < 600, cls
        codes.add(cls.code)
        # session_lost is answered by the code service's session routes alone, which say so;
        # budget_spent only by the gateway's scoring routes (a reward spec's budget).
        routes = {errors.SessionLost: SESSION_RESPONSES, errors.BudgetSpent: SCORE_RESPONSES}.get(
            cls, declared
        )
        if cls.http_status < 500 or cls.http_status in (503, 504):
            assert str(cls.http_status) in map(str, routes), f"{cls.__name__} missing from OpenAPI"
    assert len(codes) == len(errors.ALL_ERRORS) - 1  # the base shares internal_error
    # Read back from the wire, each code is its own class; internal_error is InternalError.
    assert set(errors.ERRORS_BY_CODE) == codes
    assert errors.ERRORS_BY_CODE["internal_error"] is errors.InternalError
    assert all(errors.ERRORS_BY_CODE[cls.code].code == cls.code for cls in errors.ALL_ERRORS)


async def test_an_idempotency_key_tells_batches_apart_by_what_orjson_cannot_write() -> None:
    # The batch hash is written by orjson, which writes NaN as null and refuses lone
    # surrogates: such batches are hashed as canonical JSON, still told apart, still answered.
    verifier = ToyVerifier()
    settings = CoreSettings(queue="memory", cache_ttl_s=0)
    headers = {"content-type": "application/json", "idempotency-key": "chunk-nan"}
    good = '{"id": "b", "text": "aa"}'
    async for client in client_for(create_app(toy_spec(verifier), settings)):
        nan = '{"items": [{"id": "a", "text": NaN}, ' + good + "]}"
        null = '{"items": [{"id": "a", "text": null}, ' + good + "]}"
        first = await client.post("/v1/toy/score", content=nan, headers=headers)
        assert first.status_code == 200, first.text
        again = await client.post("/v1/toy/score", content=nan, headers=headers)
        assert again.json() == first.json() and len(verifier.calls) == 1
        conflict = await client.post("/v1/toy/score", content=null, headers=headers)
        assert conflict.status_code == 409
        assert conflict.json()["error"]["code"] == "idempotency_conflict"

        headers["idempotency-key"] = "chunk-surrogate"
        surrogate = '{"items": [{"id": "a", "text": "x \\ud800"}, ' + good + "]}"
        first = await client.post("/v1/toy/score", content=surrogate, headers=headers)
        assert first.status_code == 200, first.text
        assert first.json()["results"][0]["error"]["code"] == "bad_input"
        again = await client.post("/v1/toy/score", content=surrogate, headers=headers)
        assert again.json() == first.json() and len(verifier.calls) == 2
        other = surrogate.replace("ud800", "udc00")
        conflict = await client.post("/v1/toy/score", content=other, headers=headers)
        assert conflict.status_code == 409


def test_the_key_a_header_presents_bearer_or_basic_password() -> None:
    import base64

    from tribunal.core.middleware import key_matches, presented_key

    def basic(text: str) -> str:
        return "Basic " + base64.b64encode(text.encode()).decode()

    assert presented_key("Bearer s3cret") == "s3cret"
    assert presented_key(basic("openrlhf:s3cret")) == "s3cret"
    assert presented_key(basic(":s:3")) == "s:3"  # the password may hold colons
    assert presented_key(basic("no-colon")) is None
    assert presented_key("Basic !!!not-base64") is None
    assert presented_key("Digest s3cret") is None and presented_key("") is None
    assert key_matches("s3cret", "s3cret") and not key_matches(None, "s3cret")
    assert not key_matches("s3cre", "s3cret")
