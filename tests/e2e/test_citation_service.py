"""The citation service as real processes: ``tribunal api`` + ``tribunal worker`` + Redis."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest

from bench.citation_data import TRACES, data_dir, trace_items
from tests.conftest import RedisServer, RunningService, need_data, redis_env, shared_service
from tribunal.llm.testing import FakeOpenAIServer

pytestmark = pytest.mark.e2e

CLAIM = "<answer><cite id={}>The Eiffel Tower is 330 metres tall.</cite></answer>"
EVIDENCE = {
    "S1": "The Eiffel Tower is 330 metres tall and stands in Paris.",
    "S2": "Bananas are rich in potassium.",
}


def env_for(redis: RedisServer, prefix: str, **extra: str) -> dict[str, str]:
    return redis_env(redis, prefix, **extra)


@pytest.fixture(scope="module")
def citation_service(
    request: pytest.FixtureRequest, redis_server: RedisServer
) -> Iterator[RunningService]:
    """The citation service with the default settings, for the tests that only score
    through it."""
    env = env_for(redis_server, f"c{uuid.uuid4().hex[:10]}")
    with shared_service(request, "citation", env=env) as running:
        yield running


def test_lexical_scores_and_gates_through_the_queue(citation_service: RunningService) -> None:
    running = citation_service
    items = [
        {
            "id": "honest",
            "response": CLAIM.format("S1"),
            "evidence": EVIDENCE,
        },
        {
            "id": "invented",
            "response": CLAIM.format("S7"),
            "evidence": EVIDENCE,
        },
        {
            "id": "raw",
            "response": "<answer><snippet id=S2>Bananas are rich in potassium.</snippet></answer>",
            "tool_output": "<snippet id=S2>Bananas are rich in potassium.</snippet>",
            "options": {"support": "none", "preset": "dr_tulu"},
        },
        {
            "id": "judge",
            "response": CLAIM.format("S1"),
            "evidence": EVIDENCE,
            "options": {"support": "judge"},
        },
    ]
    with running.http() as client:
        response = client.post("/v1/citation/score", json={"items": items})
        assert response.status_code == 200, response.text
        honest, invented, raw, judge = response.json()["results"]
        assert honest["reward"] == 1.0 and honest["details"]["support_mode"] == "lexical"
        assert invented["reward"] == 0.0 and invented["details"]["invalid_ids"] == ["S7"]
        assert raw["reward"] == 1.0 and raw["details"]["preset"] == "dr_tulu"
        assert judge["reward"] is None and judge["error"]["code"] == "backend_unavailable"
        assert honest["verifier"]["name"] == "citation"
        again = client.post("/v1/citation/score", json={"items": items[:1]}).json()
        assert again["results"][0]["cached"] is True
        bad = client.post("/v1/citation/score", json={"items": [{"id": "b"}]})
        assert bad.status_code == 200, bad.text
        assert bad.json()["results"][0]["error"]["field"] == "items.0.response"


def test_the_dr_tulu_traces_as_one_job(citation_service: RunningService) -> None:
    need_data(data_dir() / TRACES)
    running = citation_service
    items = trace_items()
    with running.http() as client:
        job = client.post("/v1/jobs", json={"verifier": "citation", "items": items}).json()
        state = client.get(f"/v1/jobs/{job['job_id']}", params={"wait": 60}).json()
    assert state["status"] == "done"
    results = state["results"]
    assert [r["id"] for r in results] == [item["id"] for item in items]
    assert all(r["error"] is None and 0.0 <= r["reward"] <= 1.0 for r in results)
    assert sum(len(r["details"]["invalid_ids"]) for r in results) == 3


def test_judge_mode_through_the_queue_against_a_stand_in_server(
    service: Callable[..., RunningService],
    redis_server: RedisServer,
    key_prefix: str,
    openai_compat_server: FakeOpenAIServer,
) -> None:
    env = env_for(
        redis_server,
        key_prefix,
        TRIBUNAL_CITATION_BASE_URL=openai_compat_server.base_url,
        TRIBUNAL_CITATION_MODEL="stand-in",
    )
    running = service("citation", env=env)
    padded = CLAIM.format("S1,S2")
    with running.http() as client:
        response = client.post(
            "/v1/citation/score",
            json={"items": [{"id": "p", "response": padded, "evidence": EVIDENCE}]},
        )
    [result] = response.json()["results"]
    assert result["details"]["support_mode"] == "judge" and result["reward"] == 1.0
    assert result["details"]["judge_model"] == "stand-in"
    assert result["details"]["usage"]["calls"] == 1 == len(openai_compat_server.stats.requests)
