"""``/readyz`` means "can score": ``degraded`` (200, with reasons) when a judge's backend is
unset or unreachable or a verifier of the gateway is down; ``ready`` only when none is.

The services run in-process (ASGI) on the embedded queue; what they probe is real: the fake
OpenAI-compatible server stands in for vLLM (no GPU here) over a socket, and the gateway
probes a real math service's process over HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.conftest import RunningService, free_port
from tribunal.gateway.api import create_app as create_gateway
from tribunal.gateway.settings import GatewayConfig, GatewaySettings
from tribunal.judge.api import create_app as create_judge
from tribunal.judge.settings import JudgeSettings
from tribunal.llm.testing.fake_openai import FakeOpenAIServer


async def readyz(app: FastAPI, worker: bool = True) -> tuple[int, dict[str, Any]]:
    """``GET /readyz`` of ``app``, its lifespan run; with ``worker``, once its in-process
    worker has sent its first heartbeat (it starts with the app)."""
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            for _ in range(200):
                response = await client.get("/readyz")
                reasons = response.json()["reasons"]
                if not (worker and reasons and reasons[0].endswith(": no live worker")):
                    break
                await asyncio.sleep(0.05)
    return response.status_code, response.json()


def judge_on(base_url: str | None) -> FastAPI:
    backend = {"kind": "openai", "base_url": base_url, "model": "m"} if base_url else {}
    return create_judge(JudgeSettings(queue="memory", judge={"backend": backend}))


async def test_a_judge_is_degraded_while_its_backend_is_unset_or_unreachable(
    openai_compat_server: FakeOpenAIServer,
) -> None:
    nobody = f"http://127.0.0.1:{free_port()}/v1"
    status, body = await readyz(judge_on(nobody))
    assert status == 200 and body["status"] == "degraded"
    [reason] = body["reasons"]
    assert reason.startswith(f"backend {nobody} is unreachable (ConnectError")

    status, body = await readyz(judge_on(None))
    assert status == 200 and body["status"] == "degraded"
    [reason] = body["reasons"]
    assert reason.startswith("no LLM backend is configured: set TRIBUNAL_JUDGE_BACKEND=openai")

    status, body = await readyz(judge_on(openai_compat_server.base_url))
    assert (status, body["status"], body["reasons"]) == (200, "ready", [])
    assert body["checks"]["workers.judge"] == 1


@pytest.mark.slow
async def test_a_gateway_is_degraded_while_math_is_down(
    service: Callable[..., RunningService],
) -> None:
    math = service("math", env={"TRIBUNAL_QUEUE": "memory", "TRIBUNAL_MATH_PROCESSES": "1"})
    # The other verifiers' URLs name the same math service: its /readyz answers for them, so
    # that math alone decides this gateway's readiness.
    urls = {f"{name}_url": math.base_url for name in ("math", "code", "judge", "citation")}
    gateway = GatewaySettings(queue="memory", gateway=GatewayConfig(**urls))
    status, body = await readyz(create_gateway(gateway))
    assert (status, body["status"], body["reasons"]) == (200, "ready", [])

    math.stop()
    status, body = await readyz(create_gateway(gateway))
    assert status == 200 and body["status"] == "degraded"
    assert body["reasons"][0] == f"math at {math.base_url} is unreachable (ConnectError)"
    assert len(body["reasons"]) == 4


async def test_a_service_whose_queue_does_not_answer_is_not_ready_and_says_why() -> None:
    """A service whose queue does not answer is ``not_ready`` (503), the reason listed."""
    settings = JudgeSettings(queue="redis", redis_url=f"redis://127.0.0.1:{free_port()}/0")
    status, body = await readyz(create_judge(settings), worker=False)
    assert status == 503 and body["status"] == "not_ready"
    [reason] = body["reasons"]
    assert reason.startswith("queue: ") and body["checks"]["error"] in reason
