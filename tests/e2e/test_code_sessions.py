"""Code-interpreter sessions as real processes: API, two workers, Redis, real sandboxes.

Calls reach the worker that holds their session through its own stream; the per-worker cap
refuses with a retryable error; a worker killed mid-call gives ``session_lost``, never a
fresh interpreter.
"""

from __future__ import annotations

import re
import shutil
import signal
import threading
import time
from collections.abc import Callable

import httpx
import pytest

from tests.conftest import ROOT, RedisServer, RunningService, redis_env

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed"),
]


def start_retrying(client: httpx.Client) -> httpx.Response:
    """Start a session as a client should: a retryable refusal is tried again (a start is
    taken by whichever worker claims it first, full or not)."""
    for _ in range(30):
        started = client.post("/v1/code/sessions", json={})
        if started.status_code != 429:
            return started
    return started


def test_sessions_route_to_their_owners_and_the_cap_refuses(
    service: Callable[..., RunningService], redis_server: RedisServer, key_prefix: str
) -> None:
    env = redis_env(
        redis_server,
        key_prefix,
        TRIBUNAL_CODE_SLOTS="1",
        TRIBUNAL_CODE_MAX_SESSIONS="3",
        TRIBUNAL_WORKER_HEARTBEAT_S="0.5",
    )
    running = service("code", workers=2, env=env)
    with running.http(timeout_s=60) as client:
        ids = []
        for _ in range(6):
            started = start_retrying(client)
            assert started.status_code == 201, started.text
            ids.append(started.json()["session_id"])
        owners = [session_id.partition(".")[0] for session_id in ids]
        assert sorted(owners.count(owner) for owner in set(owners)) == [3, 3]
        refused = client.post("/v1/code/sessions", json={})  # both workers hold 3
        assert refused.status_code == 429, refused.text
        error = refused.json()["error"]
        assert error["code"] == "sessions_full" and error["retryable"] is True
        assert refused.headers["Retry-After"] == "1"
        for k, session_id in enumerate(ids):
            set_it = client.post(f"/v1/code/sessions/{session_id}/run", json={"code": f"x = {k}"})
            assert set_it.status_code == 200 and set_it.json()["status"] == "ok", set_it.text
        for k, session_id in enumerate(ids):
            read = client.post(f"/v1/code/sessions/{session_id}/run", json={"code": "x * 10"})
            assert read.json()["display"] == str(k * 10), read.text
        closed = client.delete(f"/v1/code/sessions/{ids[0]}")
        assert closed.status_code == 204
        after = client.post(f"/v1/code/sessions/{ids[0]}/run", json={"code": "x"})
        assert after.status_code == 410 and after.json()["error"]["code"] == "session_lost"
        assert "closed" in after.json()["error"]["message"]
        again = start_retrying(client)  # the closed one's room is free, on its worker
        assert again.status_code == 201, again.text
        assert again.json()["session_id"].partition(".")[0] == owners[0]
        unknown = client.post("/v1/code/sessions/nope/run", json={"code": "1"})
        assert unknown.status_code == 410
        bad = client.post(f"/v1/code/sessions/{ids[1]}/run", json={"code": "1", "timeot_s": 1})
        assert bad.status_code == 422 and bad.json()["error"]["field"] == "timeot_s"
        for session_id in ids[1:]:  # room for the docs' example
            assert client.delete(f"/v1/code/sessions/{session_id}").status_code == 204
    # The example of docs/sessions.md, as written.
    [example] = re.findall(
        r"```python\n(.*?)```", (ROOT / "docs" / "sessions.md").read_text(), re.S
    )
    exec(example, {"BASE": running.base_url})


def test_a_worker_killed_mid_call_loses_its_sessions(
    service: Callable[..., RunningService], redis_server: RedisServer, key_prefix: str
) -> None:
    env = redis_env(
        redis_server, key_prefix, TRIBUNAL_CODE_SLOTS="1", TRIBUNAL_WORKER_HEARTBEAT_S="0.5"
    )
    running = service("code", env=env)
    with running.http(timeout_s=60) as client:
        session_id = client.post("/v1/code/sessions", json={}).json()["session_id"]
        assert (
            client.post(
                f"/v1/code/sessions/{session_id}/run", json={"code": "state = 'kept'"}
            ).json()["status"]
            == "ok"
        )
        answers: list[httpx.Response] = []
        long_call = threading.Thread(
            target=lambda: answers.append(
                client.post(
                    f"/v1/code/sessions/{session_id}/run",
                    json={
                        "code": "import time\nprint('started', flush=True)\ntime.sleep(40)",
                        "timeout_s": 50.0,
                    },
                )
            )
        )
        long_call.start()
        time.sleep(1.0)  # the call is on the owner's stream and running
        running.signal_group("worker0", signal.SIGKILL)
        running.wait_exit("worker0", 30)
        long_call.join(30)
        assert not long_call.is_alive()
        [lost] = answers
        assert lost.status_code == 410, lost.text
        assert "stopped or died" in lost.json()["error"]["message"]
        running.start_worker(0)
        later = client.post(f"/v1/code/sessions/{session_id}/run", json={"code": "state"})
        assert later.status_code == 410 and later.json()["error"]["code"] == "session_lost"
        assert client.post("/v1/code/sessions", json={}).status_code == 201


def test_a_restarted_worker_holding_a_session_stops_on_sigterm(
    service: Callable[..., RunningService], redis_server: RedisServer, key_prefix: str
) -> None:
    """A young worker (its Redis connections still being set up) stops on SIGTERM: on
    Python 3.11 a heartbeat ended by cancellation could lose it and beat on (issue 39; 3 of
    14 runs on a loaded machine; tests/core/test_worker.py forces the case)."""
    env = redis_env(
        redis_server, key_prefix, TRIBUNAL_CODE_SLOTS="1", TRIBUNAL_WORKER_HEARTBEAT_S="0.5"
    )
    running = service("code", env=env)
    with running.http(timeout_s=60) as client:
        assert client.post("/v1/code/sessions", json={}).status_code == 201
        running.signal_group("worker0", signal.SIGKILL)
        running.wait_exit("worker0", 30)
        running.start_worker(0)
        # A worker holding a session stops on SIGTERM (its own stream's claims see the stop).
        assert client.post("/v1/code/sessions", json={}).status_code == 201
    running.signal_group("worker0", signal.SIGTERM)
    assert running.wait_exit("worker0", 10) == 0
