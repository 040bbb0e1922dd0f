"""Issue 38: a body over ``INLINE_BYTES``, parsed and validated off the event loop, gets the
answer FastAPI's own validation on the loop gave: the same status, error and field, in the
same order (the API key first, then headers, then the body)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

import tribunal.core.routes.body
from tests.core.test_app import client_for
from tests.core.toy import ToyVerifier, toy_spec
from tribunal.core.app import create_app
from tribunal.core.offload import INLINE_BYTES
from tribunal.core.settings import CoreSettings

PAD = "a" * (INLINE_BYTES + 1000)
ITEM = {"id": "a", "text": PAD}
KEY = "k" * 20
AUTH = {"authorization": f"Bearer {KEY}"}

CASES: list[tuple[str, str, dict[str, str]]] = [
    ("/v1/toy/score", json.dumps({"items": [ITEM], "zz": 1}), AUTH),
    ("/v1/toy/score", json.dumps({"items": [], "pad": PAD}), AUTH),
    ("/v1/toy/score", json.dumps({"items": PAD}), AUTH),
    ("/v1/toy/score", json.dumps([PAD]), AUTH),
    ("/v1/toy/score", '{"items": [{"id": "a", "text": "x"}], "z\\ud800": "' + PAD + '"}', AUTH),
    ("/v1/toy/score", json.dumps({"items": [ITEM], "zz": 1}), {**AUTH, "idempotency-key": ""}),
    ("/v1/toy/score", json.dumps({"items": [ITEM], "zz": 1}), {"authorization": "Bearer no"}),
    ("/v1/toy/score", json.dumps({"items": [ITEM]})[:-1], AUTH),
    ("/v1/jobs", json.dumps({"items": [ITEM]}), AUTH),
    ("/v1/jobs", json.dumps({"verifier": "nope", "items": [ITEM]}), AUTH),
    ("/v1/jobs", json.dumps({"verifier": "toy", "items": [ITEM], "idempotency_key": 5}), AUTH),
]


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    settings = CoreSettings(
        queue="memory", max_batch_items=10, max_request_bytes=1 << 20, api_key=KEY
    )
    async for c in client_for(create_app(toy_spec(ToyVerifier()), settings)):
        yield c


async def _answer(
    client: httpx.AsyncClient, path: str, body: str, headers: dict[str, str]
) -> tuple[int, Any]:
    response = await client.post(
        path, content=body.encode(), headers={"content-type": "application/json", **headers}
    )
    return response.status_code, response.json()


@pytest.mark.parametrize(("path", "body", "headers"), CASES)
async def test_a_large_bad_body_is_answered_as_on_the_loop(
    client: httpx.AsyncClient,
    monkeypatch: pytest.MonkeyPatch,
    path: str,
    body: str,
    headers: dict[str, str],
) -> None:
    assert len(body.encode()) > INLINE_BYTES
    status, answer = await _answer(client, path, body, headers)
    assert status in (401, 422), answer
    # Every body at or under the bound is validated by FastAPI itself, as before.
    monkeypatch.setattr(tribunal.core.routes.body, "INLINE_BYTES", 1 << 30)
    assert await _answer(client, path, body, headers) == (status, answer)


async def test_a_large_valid_body_is_scored(client: httpx.AsyncClient) -> None:
    body = json.dumps({"items": [ITEM, {"id": "b", "text": "xyz"}]})
    status, answer = await _answer(client, "/v1/toy/score", body, AUTH)
    assert status == 200, answer
    assert [r["reward"] for r in answer["results"]] == [1.0, 0.0]
