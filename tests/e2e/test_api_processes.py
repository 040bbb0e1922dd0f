"""``tribunal api`` with TRIBUNAL_API_PROCESSES=2: two real API processes on one port, on a
real Redis, whose metrics a scrape reports together."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import psutil
import pytest

from tests.conftest import RedisServer, RunningService, redis_env, stop_process

pytestmark = pytest.mark.e2e


def _latency_count(metrics: str) -> float:
    found = re.search(
        r'^tribunal_request_latency_seconds_count\{route="score",verifier="math"\} (\S+)$',
        metrics,
        re.MULTILINE,
    )
    return float(found.group(1)) if found else 0.0


def test_two_api_processes_serve_one_port_and_report_every_request(
    service: Callable[..., RunningService],
    redis_server: RedisServer,
    key_prefix: str,
    tmp_path: Path,
) -> None:
    shared = tmp_path / "metrics"
    shared.mkdir()
    env = redis_env(
        redis_server,
        key_prefix,
        TRIBUNAL_API_PROCESSES="2",
        TRIBUNAL_MATH_PROCESSES="1",
        PROMETHEUS_MULTIPROC_DIR=str(shared),
    )
    running = service("math", env=env)
    api = psutil.Process(running.processes["api"].pid)
    servers = [p for p in api.children() if "spawn_main" in " ".join(p.cmdline())]
    assert len(servers) == 2
    requests = 40
    # A new connection per request, so that both processes take some of them.
    with httpx.Client(
        base_url=running.base_url, timeout=60, limits=httpx.Limits(max_keepalive_connections=0)
    ) as client:
        for i in range(requests):
            item = {"id": str(i), "response": f"#### {i}", "ground_truth": str(i)}
            response = client.post("/v1/math/score", json={"items": [item]})
            assert response.status_code == 200, response.text
            assert response.json()["results"][0]["reward"] == 1.0
        # Whichever process answers a scrape reports the requests of both.
        counts = {_latency_count(client.get("/metrics").text) for _ in range(10)}
    assert counts == {requests}
    assert len(list(shared.glob("histogram_*.db"))) == 2, "both processes served requests"
    running.stop()
    deadline = time.monotonic() + 15
    while any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in servers):
        assert time.monotonic() < deadline, "an API process outlived tribunal api"
        time.sleep(0.2)


def test_each_api_process_logs_in_the_services_format(
    service: Callable[..., RunningService], redis_server: RedisServer, key_prefix: str
) -> None:
    env = redis_env(
        redis_server,
        key_prefix,
        TRIBUNAL_API_PROCESSES="2",
        TRIBUNAL_SYNC_TIMEOUT_S="0.3",
        TRIBUNAL_QUEUE="redis",
    )
    running = service("math", env=env)
    stop_process(running.processes.pop("worker0"))  # nothing is scored: a 504, logged
    item = {"id": "a", "response": "#### 1", "ground_truth": "1"}
    with running.http() as client:
        assert client.post("/v1/math/score", json={"items": [item]}).status_code == 504
    # The API processes are spawned by uvicorn: the format is theirs only if uvicorn was
    # given it (without, the line came out bare, by logging's last-resort handler).
    line = r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ ERROR tribunal\.core\.app: timeout: "
    deadline = time.monotonic() + 10
    while not re.search(line, running.log("api"), re.MULTILINE) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert re.search(line, running.log("api"), re.MULTILINE), running.log("api")
