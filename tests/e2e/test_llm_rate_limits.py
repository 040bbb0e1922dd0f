"""A judge backend's requests_per_minute held across two worker processes through a real Redis.

``tribunal api judge`` with two ``tribunal worker judge`` processes, a real Redis and the fake
OpenAI-compatible server (real HTTP). Each worker holds at most two items, so both score;
with one window per process the six calls would all arrive at once. The assertion counts the
server's arrivals within any window: never more than the limit.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from aiohttp import web

from tests.conftest import RedisServer, RunningService, redis_env
from tribunal.llm.testing import FakeOpenAIServer, FakeScript

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

LIMIT = 3
SLACK_S = 2.0
"""Arrivals are stamped by the server, admissions by Redis's clock before the request is
sent: an arrival may come up to a request's transit later than its admission."""


class StampedServer(FakeOpenAIServer):
    """The fake server, stamping each chat request's arrival (monotonic seconds)."""

    def __init__(self, script: FakeScript) -> None:
        super().__init__(script)
        self.arrivals: list[float] = []

    async def _chat(self, request: web.Request) -> web.Response:
        self.arrivals.append(time.monotonic())
        return await super()._chat(request)


def items(n: int) -> list[dict[str, Any]]:
    return [
        {"id": f"i{i}", "question": f"Q{i}?", "response": f"A{i}.", "rubrics": [{"text": "ok"}]}
        for i in range(n)
    ]


def test_two_workers_never_send_more_than_the_limit_in_a_minute(
    service: Callable[..., RunningService], redis_server: RedisServer, key_prefix: str
) -> None:
    server = StampedServer(FakeScript())
    server.start()
    try:
        env = redis_env(
            redis_server,
            key_prefix,
            TRIBUNAL_JUDGE_MODEL="fake-judge",
            TRIBUNAL_JUDGE_BASE_URL=server.base_url,
            TRIBUNAL_JUDGE_REQUESTS_PER_MINUTE=str(LIMIT),
            TRIBUNAL_WORKER_BATCH_SIZE="1",
            TRIBUNAL_WORKER_CONCURRENCY="2",
        )
        running = service("judge", workers=2, env=env)
        with running.http() as client:
            job = client.post("/v1/jobs", json={"verifier": "judge", "items": items(2 * LIMIT)})
            assert job.status_code == 202, job.text
            state: dict[str, Any] = {}
            for _ in range(10):  # long polls of up to max_wait_s each
                state = client.get(f"/v1/jobs/{job.json()['job_id']}", params={"wait": 30}).json()
                if state["status"] == "done":
                    break
            assert state["status"] == "done", state
            assert all(r["error"] is None and r["reward"] == 1.0 for r in state["results"])
            metrics = client.get("/metrics").text
    finally:
        server.stop()

    arrivals = sorted(server.arrivals)
    assert len(arrivals) == 2 * LIMIT  # one call per item, none lost, none repeated
    # Within any window (less the slack), never more than LIMIT arrivals: the 4th arrives a
    # minute after the 1st.
    for i in range(len(arrivals) - LIMIT):
        assert arrivals[i + LIMIT] - arrivals[i] >= 60.0 - SLACK_S, arrivals
    # Each call's wait was observed; the three past the limit waited for the next minute.
    assert f'tribunal_backend_rate_wait_seconds_count{{verifier="judge"}} {2 * LIMIT}.0' in metrics
    assert 'tribunal_backend_rate_wait_seconds_bucket{le="30.0",verifier="judge"} 3.0' in metrics
