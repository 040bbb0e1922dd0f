"""A judge backend's requests_per_minute held across processes through a real Redis.

``tribunal api judge`` with two ``tribunal worker judge`` processes, a real Redis and the fake
OpenAI-compatible server (real HTTP). The window is the real minute; rather than wait one out,
the test puts a third process's admissions into it first: two calls made 60 - ``HEADROOM_S``
seconds ago (members and scores as :class:`~tribunal.llm.limits.RedisLimiter` writes them).
With a limit of three, one of the job's three calls fits beside them and the other two wait
until they leave the window. Workers that each kept a window of their own, or that read the
shared one without recording their admissions in it, would send all three at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import redis
from aiohttp import web

from tests.conftest import RedisServer, RunningService, redis_env
from tribunal.llm.limits import WINDOW_S, limit_key_stem
from tribunal.llm.testing import FakeOpenAIServer, FakeScript

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

LIMIT = 3
EARLIER = 2
"""Admissions of another process already in the window."""
HEADROOM_S = 8.0
"""How long before the earlier admissions leave the window: time enough for the job to reach
the workers (they are ready before the admissions are put in) on a loaded machine."""
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


def admit_earlier_calls(redis_server: RedisServer, stem: str) -> float:
    """Put :data:`EARLIER` admissions of 0 tokens, made ``WINDOW_S - HEADROOM_S`` seconds ago
    on Redis's clock, into the window at ``stem``; return when they leave it (monotonic s)."""
    client = redis.Redis.from_url(redis_server.url)
    try:
        seconds, micros = client.time()
        left = time.monotonic() + HEADROOM_S
        made_ms = seconds * 1000 + micros // 1000 - round((WINDOW_S - HEADROOM_S) * 1000)
        client.zadd(f"{stem}:admitted", {f"earlier{i}|0": made_ms for i in range(EARLIER)})
    finally:
        client.close()
    return left


def test_workers_share_the_window_with_every_process_on_the_redis(
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
            # Each worker holds at most two of the three items, so both score.
            TRIBUNAL_WORKER_BATCH_SIZE="1",
            TRIBUNAL_WORKER_CONCURRENCY="2",
        )
        running = service("judge", workers=2, env=env)
        stem = limit_key_stem(key_prefix, server.base_url, "fake-judge")
        left = admit_earlier_calls(redis_server, stem)
        with running.http() as client:
            job = client.post("/v1/jobs", json={"verifier": "judge", "items": items(LIMIT)})
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
    assert len(arrivals) == LIMIT  # one call per item, none lost, none repeated
    # Beside the earlier admissions, only LIMIT - EARLIER calls fit before they left.
    assert arrivals[LIMIT - EARLIER] >= left - SLACK_S, (arrivals, left)
    # Each call's wait was observed: one went at once, the other two waited seconds.
    count = 'tribunal_backend_rate_wait_seconds_count{verifier="judge"}'
    assert f"{count} {LIMIT}.0" in metrics
    at_once = 'tribunal_backend_rate_wait_seconds_bucket{le="1.0",verifier="judge"}'
    assert f"{at_once} {LIMIT - EARLIER}.0" in metrics
