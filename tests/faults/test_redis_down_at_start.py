"""Issue 7, defect 2: an API started while the named Redis is down waits for it.

It used to fall back to the embedded queue for ever (``/readyz`` 200, ``"queue":"memory"``),
its dedicated workers idle and its accepted jobs gone on the next restart.
"""

from __future__ import annotations

import signal
from collections.abc import Callable

import pytest

from bench.fault_scenarios import Stack, collect, math_items, status, submit, tally, wait_until

pytestmark = pytest.mark.e2e


def test_an_api_started_without_its_redis_waits_for_it_and_then_uses_it(
    make_stack: Callable[..., Stack],
) -> None:
    stack = make_stack(TRIBUNAL_QUEUE="auto")  # the default, with TRIBUNAL_REDIS_URL named
    stack.start_api()
    stack.start_worker(0)
    with stack.http() as client:
        wait_until(lambda: status(client, "/healthz") == 200, 60, "alive")
        ready = client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["checks"]["queue"] == "redis"
        refused = client.post("/v1/jobs", json={"verifier": "math", "items": math_items(1)})
        assert refused.status_code == 503
        assert refused.json()["error"]["code"] == "queue_unavailable"
        assert "waiting for it" in stack.log("api")

        stack.start_redis()
        wait_until(lambda: status(client, "/readyz") == 200, 60, "ready after Redis came")
        job_id = submit(client, math_items(30))
        assert tally(30, collect(client, job_id, 60)).clean

    # The job lives in Redis: an API started again still has it.
    stack.signal_group("api", signal.SIGTERM)
    stack.wait_exit("api", 20)
    stack.start_api()
    with stack.http() as client:
        wait_until(lambda: status(client, "/readyz") == 200, 60, "ready again")
        assert tally(30, collect(client, job_id, 10)).clean
