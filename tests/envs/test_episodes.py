"""The environment server's own rules, in process (no verifier is called): tasks are this
server's to define, sessions are capped and reaped, requests are named and keyed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from tests.conftest import ROOT, need_data
from tribunal.envs.app import create_app
from tribunal.envs.ors import EnvsSettings, OrsServer


@pytest.fixture
def client() -> Iterator[TestClient]:
    need_data(ROOT.parent / "shared" / "data" / "math" / "gsm8k_test.jsonl")
    settings = EnvsSettings(max_sessions=2, idle_ttl_s=60, api_key="k")
    with TestClient(create_app(settings), headers={"X-API-Key": "k"}) as test_client:
        yield test_client


def create(client: TestClient, sid: str, **body: object) -> int:
    headers = {"X-Session-ID": sid, "X-Deployment": "math"}
    return client.post("/create", json=body, headers=headers).status_code


def test_a_task_spec_is_this_servers_never_the_clients(client: TestClient) -> None:
    spec = client.post("/math/task", json={"split": "gsm8k_test", "index": 5}).json()["task"]
    assert spec == {"split": "gsm8k_test", "index": 5, "id": "gsm8k/5"}
    assert create(client, "a", task_spec=spec) == 200
    # The same place with a gold answer of the client's own, or another task's id: refused.
    assert create(client, "b", task_spec={**spec, "ground_truth": "1"}) == 400
    assert create(client, "b", task_spec={**spec, "id": "gsm8k/6"}) == 400
    assert create(client, "b", split="gsm8k_test", index=10_000) == 400
    assert create(client, "b", split="train", index=0) == 400


def test_sessions_are_capped_and_an_idle_one_is_reaped(client: TestClient) -> None:
    assert create(client, "a", split="gsm8k_test", index=0) == 200
    assert create(client, "b", split="gsm8k_test", index=1) == 200
    assert create(client, "c", split="gsm8k_test", index=2) == 503  # the cap: retry later
    assert client.post("/delete", headers={"X-Session-ID": "b"}).status_code == 200
    assert create(client, "c", split="gsm8k_test", index=2) == 200
    server: OrsServer = client.app.state.ors  # type: ignore[attr-defined]
    server.held["a"].seen_s -= 61  # no request named "a" for longer than its TTL
    assert create(client, "d", split="gsm8k_test", index=3) == 200
    assert client.post("/ping", headers={"X-Session-ID": "a"}).status_code == 404
    assert client.post("/ping", headers={"X-Session-ID": "c"}).status_code == 200


def test_requests_name_their_session_environment_and_key(client: TestClient) -> None:
    missing = client.get("/math/prompt")
    assert missing.status_code == 400 and "X-Session-ID" in missing.text
    unknown = client.get("/chess/splits")
    assert unknown.status_code == 404 and "math" in unknown.text
    assert client.get("/math/splits", headers={"X-API-Key": "wrong"}).status_code == 401
    assert client.get("/health", headers={"X-API-Key": ""}).status_code == 200
    assert client.post("/openenv/math/reset", headers={"X-API-Key": "no"}).status_code == 401
