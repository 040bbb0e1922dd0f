"""Logs that do not grow with traffic: at INFO, scoring writes no line per request (the
gateway's requests to a verifier included); requests are counted in /metrics instead. At
DEBUG the per-request lines are there, so the count below is not vacuous.

Real processes: the math API (embedded queue) and a gateway API in front of it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx

from tribunal.testing.stack import RunningService, start_service

REQUESTS = 40


def _lines(running: RunningService) -> int:
    return len(running.log("api").splitlines())


def _score(gateway: RunningService, n: int) -> None:
    with gateway.http() as http:
        for i in range(n):
            item = {"id": f"q{i}", "verifier": "math", "response": f"#### {i}", "ground_truth": "1"}
            answer = http.post("/v1/score", json={"items": [item]})
            assert answer.status_code == 200, answer.text


def _requests_counted(gateway: RunningService) -> float:
    text = httpx.get(f"{gateway.base_url}/metrics", timeout=30).text
    for line in text.splitlines():
        if line.startswith("tribunal_request_latency_seconds_count") and 'route="score"' in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(text)


def test_scoring_writes_no_log_line_per_request_at_info(
    service: Callable[..., RunningService], tmp_path: Path
) -> None:
    memory = {"TRIBUNAL_QUEUE": "memory", "TRIBUNAL_MATH_PROCESSES": "1"}
    math = service("math", env=memory)
    gateways: dict[str, RunningService] = {}
    try:
        for level in ("INFO", "DEBUG"):
            (tmp_path / level).mkdir()
            gateways[level] = start_service(
                "gateway",
                env={
                    "TRIBUNAL_QUEUE": "memory",
                    "TRIBUNAL_GATEWAY_MATH_URL": math.base_url,
                    "TRIBUNAL_LOG_LEVEL": level,
                },
                log_dir=tmp_path / level,  # a log file of its own
            )
        _check(math, gateways)
    finally:
        for gateway in gateways.values():
            gateway.stop()


def _check(math: RunningService, gateways: dict[str, RunningService]) -> None:
    for gateway in gateways.values():
        _score(gateway, 1)  # warm-up: connections opened, anything said once is said
    before = {level: _lines(g) for level, g in gateways.items()}
    math_before = _lines(math)
    for gateway in gateways.values():
        _score(gateway, REQUESTS)
    assert _lines(gateways["INFO"]) == before["INFO"], gateways["INFO"].log("api")
    assert _lines(math) == math_before, math.log("api")
    assert _lines(gateways["DEBUG"]) >= before["DEBUG"] + REQUESTS
    assert _requests_counted(gateways["INFO"]) == REQUESTS + 1
