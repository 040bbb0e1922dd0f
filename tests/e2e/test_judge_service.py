"""The judge service as real processes: ``tribunal api judge`` + ``tribunal worker judge`` + a
real Redis, against a fake OpenAI-compatible judge served over real HTTP.

The fake judge (``tribunal.llm.testing.FakeOpenAIServer``, in a thread of the test process)
stands in for vLLM, which needs a GPU and weights this machine does not have; it answers
with scripted verdicts and log-probabilities. Everything on our side of its socket is real.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, RedisServer, RunningService, free_port, redis_env
from tribunal.llm.testing import FakeOpenAIServer, FakeScript

pytestmark = pytest.mark.e2e

# The README's judge example, verbatim: a positive and a negative rubric, plus the v3 set.
README_CURL_BODY = (
    '{"items":[{"id":"r1","question":"What is the boiling point of water at sea level?",'
    '"response":"100 °C (212 °F) at 1 atm.","rubrics":[{"text":"States 100 °C","polarity":'
    '"positive"},{"text":"Confuses Celsius and Fahrenheit","polarity":"negative"}],'
    '"rubric_sets":["v3"]}]}'
)


def env_for(redis: RedisServer, prefix: str, **extra: str) -> dict[str, str]:
    return redis_env(redis, prefix, **{"TRIBUNAL_JUDGE_MODEL": "fake-judge", **extra})


def positive_items(n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"i{i}",
            "question": f"Question {i}?",
            "response": f"Answer {i}.",
            "rubrics": [{"text": f"Answers question {i}"}, {"text": "Is concise"}],
            "rubric_sets": [],
        }
        for i in range(n)
    ]


def test_the_readme_curl_example_matches_a_hand_computation(
    service: Callable[..., RunningService],
    redis_server: RedisServer,
    key_prefix: str,
    openai_compat_server: FakeOpenAIServer,
) -> None:
    openai_compat_server.script = FakeScript(
        default_level=0,  # Wrong-Entity Confabulation (v3): flaw absent
        rules=[
            ("States 100 °C", 2),  # requirement met
            ("Confuses Celsius", 0),  # flaw absent
            ("Every specific factual claim", 1),  # Citation Discipline (v3): partly met
            ("substantial material that does not serve", 2),  # Off-Query Padding (v3): present
            ("drops with altitude", 1),
            ("wrong value", 0),
        ],
        probs={1: {1: 0.5, 2: 0.5}},  # a judge torn between 1 and 2: expected score 0.75
    )
    running = service(
        "judge",
        env=env_for(
            redis_server, key_prefix, TRIBUNAL_JUDGE_BASE_URL=openai_compat_server.base_url
        ),
    )
    body = json.loads(README_CURL_BODY)
    body["items"].append(
        {  # DR Tulu's shape: a negative weight marks a flaw
            "id": "r2",
            "question": "What is the boiling point of water at sea level?",
            "response": "100 °C; it drops with altitude.",
            "rubrics": [
                {"description": "Mentions that the boiling point drops with altitude", "weight": 3},
                {"description": "Gives a wrong value for the boiling point", "weight": -2},
            ],
            "rubric_sets": [],
        }
    )
    with running.http() as client:
        response = client.post(
            "/v1/judge/score",
            content=json.dumps(body).encode(),
            headers={"content-type": "application/json"},
        )
    assert response.status_code == 200, response.text
    r1, r2 = response.json()["results"]

    # weighted mean: reward = Σ w·t / Σ w, t = s for a requirement and 1 - s for a flaw.
    assert r1["error"] is None and r1["verifier"]["name"] == "judge"
    assert r1["reward"] == pytest.approx((1.0 + (1 - 0.0) + 0.75 + (1 - 1.0) + (1 - 0.0)) / 5)
    assert r1["reward"] == pytest.approx(0.75)
    rubrics = r1["details"]["rubrics"]
    assert [(r["source"], r["polarity"], r["verdict"]) for r in rubrics] == [
        ("instance", "positive", "met"),
        ("instance", "negative", "absent"),
        ("v3@1", "positive", "partially_met"),
        ("v3@1", "negative", "present"),
        ("v3@1", "negative", "absent"),
    ]
    assert [r["score"] for r in rubrics] == pytest.approx([1.0, 0.0, 0.75, 1.0, 0.0])
    assert [r["reward_term"] for r in rubrics] == pytest.approx([1.0, 1.0, 0.75, 0.0, 1.0])
    assert all(r["score_source"] == "logprobs" for r in rubrics)
    assert rubrics[2]["verdict_probs"] == pytest.approx({"0": 0.0, "1": 0.5, "2": 0.5})
    assert r1["details"]["rubric_sets"] == ["v3@1"]
    assert r1["details"]["judge_model"] == "fake-judge"
    assert r1["details"]["usage"]["calls"] == 5  # one call per rubric by default

    assert r2["error"] is None
    assert r2["reward"] == pytest.approx((3 * 0.75 + 2 * (1 - 0.0)) / (3 + 2))
    assert [(r["polarity"], r["weight"]) for r in r2["details"]["rubrics"]] == [
        ("positive", 3.0),
        ("negative", 2.0),
    ]
    assert len(openai_compat_server.stats.requests) == 7
    assert {body["model"] for body in openai_compat_server.stats.requests} == {"fake-judge"}


def test_backend_down_gives_item_errors_and_the_service_recovers(
    service: Callable[..., RunningService], redis_server: RedisServer, key_prefix: str
) -> None:
    port = free_port()  # nothing listens here until the backend "comes back" below
    env = env_for(
        redis_server,
        key_prefix,
        TRIBUNAL_JUDGE_BASE_URL=f"http://127.0.0.1:{port}/v1",
        TRIBUNAL_JUDGE_TIMEOUT_S="1",
        TRIBUNAL_JUDGE_MAX_RETRIES="1",
        TRIBUNAL_JUDGE_BACKOFF_S="0.05",
    )
    running = service("judge", env=env)
    items = positive_items(3)
    with running.http() as client:
        job_id = client.post("/v1/jobs", json={"verifier": "judge", "items": items}).json()[
            "job_id"
        ]
        assert client.get("/healthz").status_code == 200
        assert client.get("/readyz").status_code == 200
        state = client.get(f"/v1/jobs/{job_id}", params={"wait": 30}).json()
        assert state["status"] == "done"
        for result in state["results"]:
            assert result["reward"] is None
            error = result["error"]
            assert error["code"] == "backend_unavailable" and error["retryable"] is True
            assert "unreachable" in error["message"] and "2 of 2 rubrics" in error["message"]
            assert all(
                r["error"]["code"] == "backend_unavailable" for r in result["details"]["rubrics"]
            )
        down = client.post("/v1/judge/score", json={"items": items})
        assert down.status_code == 200
        assert [r["error"]["code"] for r in down.json()["results"]] == ["backend_unavailable"] * 3
        assert client.get("/healthz").status_code == 200

        backend = FakeOpenAIServer(FakeScript(default_level=2))
        backend.start(port=port)
        try:
            up = client.post("/v1/judge/score", json={"items": items})
        finally:
            backend.stop()
    assert up.status_code == 200
    # Errors are never cached: the same items are scored now that the backend answers.
    assert [(r["reward"], r["error"], r["cached"]) for r in up.json()["results"]] == [
        (1.0, None, False)
    ] * 3
    assert all(p.poll() is None for p in running.processes.values()), running.log_text()


def test_no_backend_configured_says_how_to_configure_one(
    service: Callable[..., RunningService],
    redis_server: RedisServer,
    key_prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("TRIBUNAL_JUDGE_BASE_URL", "TRIBUNAL_JUDGE_BACKEND", "TRIBUNAL_JUDGE_MODEL"):
        monkeypatch.delenv(name, raising=False)  # the services inherit the test's environment
    env = env_for(redis_server, key_prefix)
    del env["TRIBUNAL_JUDGE_MODEL"]
    running = service("judge", env=env)
    with running.http() as client:
        assert client.get("/healthz").status_code == 200
        response = client.post(
            "/v1/judge/score",
            content=README_CURL_BODY.encode(),
            headers={"content-type": "application/json"},
        )
    assert response.status_code == 200
    [result] = response.json()["results"]
    assert result["reward"] is None
    assert result["error"]["code"] == "backend_unavailable"
    assert "TRIBUNAL_JUDGE_BASE_URL" in result["error"]["message"]
    assert "TRIBUNAL_JUDGE_MODEL" in result["error"]["message"]
    assert result["details"]["backend"] == "none"


@pytest.mark.slow
def test_the_benchmark_quick_mode_prints_its_figures(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "bench/judge_throughput.py", "--quick"],
        cwd=ROOT,
        # Recorded beside the test, not over the committed bench/results/ the docs show.
        env={**os.environ, "TRIBUNAL_BENCH_RESULTS": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert set(report) == {
        "benchmark",
        "command",
        "target",
        "meets_target",
        "settings",
        "runs",
        "honest_beside_hostile",
    }
    assert report["command"] == "python bench/judge_throughput.py --quick"
    assert report["settings"]["verdicts_per_run"] == 1000
    assert {"service_env", "fake_judge", "items_per_job", "http_concurrency"} <= set(
        report["settings"]
    )
    assert [run["rubrics_per_call"] for run in report["runs"]] == [1, 4]
    for run in report["runs"]:
        assert {
            "verdicts_per_s",
            "ideal_verdicts_per_s",
            "pct_of_ideal",
            "first_verdict_s",
            "elapsed_s",
            "backend",
            "cpu_ms_per_verdict",
        } <= set(run)
        # The figures depend on the machine; that every verdict came back does not.
        assert run["verdicts"] == 1000 and run["item_errors"] == 0
        assert run["verdicts_per_s"] > 0 and 0 < run["first_verdict_s"] < run["elapsed_s"] + 1
        assert run["backend"]["calls"] == 1000 // run["rubrics_per_call"]
    # An honest item beside a hostile one (12,000 characters, and the 400,000 limit) is
    # answered first: order, not time.
    beside = report["honest_beside_hostile"]
    assert [b["hostile_chars"] for b in beside] == [12_000, 400_000]
    assert all(b["honest_first"] for b in beside)
    recorded = json.loads((tmp_path / "judge_throughput.json").read_text())
    assert recorded["report"] == report and recorded["command"] == report["command"]
    assert [row[0] for row in recorded["tables"][0]["rows"]] == ["1", "4"]
