"""A stand-in reward service for tests and benchmarks: Tribunal's jobs API (``POST /v1/jobs``,
``GET /v1/jobs/{id}?wait=``) on real HTTP, scoring with a Python function after a fixed
latency. It stands in for a verifier whose behaviour a test must control (a reward a tiny
model can learn, an exact latency, an outage); everything on the trainer's side is real."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

ScoreFn = Callable[[dict[str, Any]], float | str | None]


def token_share_reward(token: str) -> ScoreFn:
    """Reward = share of the whitespace-free characters of ``response`` that belong to
    occurrences of ``token``, in ``[0, 1]`` (a reward a random tiny model can learn)."""

    def score(item: dict[str, Any]) -> float:
        text = "".join(str(item["response"]).split())
        return min(1.0, text.count(token) * len(token) / max(len(text), 1))

    return score


class StandInRewardServer:
    """The jobs API in a thread of its own, on a free port of 127.0.0.1.

    Args:
        score: item -> reward; None: unscorable (a ``bad_input`` error); a string: a
            retryable error with that code (``sandbox_error``, ``timeout`` ...).
        latency_s: each job completes this long after it was created.
    """

    def __init__(self, score: ScoreFn, latency_s: float = 0.0) -> None:
        self.score = score
        self.latency_s = latency_s
        self.jobs: dict[str, dict[str, Any]] = {}
        self.items_scored = 0
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def _app(self) -> Any:
        from fastapi import FastAPI
        from fastapi.responses import JSONResponse

        app = FastAPI()

        @app.post("/v1/jobs", status_code=202)
        async def create(body: dict[str, Any]) -> dict[str, Any]:
            key = body.get("idempotency_key") or uuid.uuid4().hex
            if key not in self.jobs:
                self.jobs[key] = {
                    "items": body["items"],
                    "done_at": time.monotonic() + self.latency_s,
                }
            return {"job_id": key, "created": True}

        @app.get("/v1/jobs/{job_id}")
        async def get(job_id: str, wait: float = 0.0) -> JSONResponse:
            job = self.jobs.get(job_id)
            if job is None:
                return JSONResponse({"error": {"code": "job_not_found", "message": job_id}}, 404)
            remaining = job["done_at"] - time.monotonic()
            if 0 < remaining <= wait:
                await asyncio.sleep(remaining)
            done = time.monotonic() >= job["done_at"]
            results: list[dict[str, Any] | None] = [None] * len(job["items"])
            if done:
                results = [self._result(item) for item in job["items"]]
            if done and "counted" not in job:
                job["counted"] = True
                self.items_scored += len(job["items"])
            return JSONResponse(
                {
                    "job_id": job_id,
                    "verifier": "stand_in",
                    "status": "done" if done else "pending",
                    "total": len(job["items"]),
                    "completed": len(job["items"]) if done else 0,
                    "results": results,
                }
            )

        @app.get("/readyz")
        async def ready() -> dict[str, str]:
            return {"status": "ok"}

        return app

    def _result(self, item: dict[str, Any]) -> dict[str, Any]:
        reward = self.score(item)
        error = None
        if reward is None:
            error = {"code": "bad_input", "message": "unscorable", "retryable": False}
        elif isinstance(reward, str):
            error = {"code": reward, "message": "failed", "retryable": True}
            reward = None
        verifier = {"name": "stand_in", "version": "1", "config_hash": "0" * 16}
        return {
            "id": item["id"],
            "reward": reward,
            "error": error,
            "details": {},
            "verifier": verifier,
        }

    def start(self) -> StandInRewardServer:
        """Start serving; returns once the port answers."""
        import httpx
        import uvicorn

        config = uvicorn.Config(self._app(), host="127.0.0.1", port=self.port, log_level="error")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{self.url}/readyz", timeout=1)
                return self
            except httpx.HTTPError:
                time.sleep(0.05)
        raise TimeoutError(f"stand-in reward server on {self.url} did not start")

    def stop(self) -> None:
        """Stop serving (connections are refused afterwards)."""
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(10)
            self._server = None
