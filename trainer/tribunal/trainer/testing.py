"""A stand-in reward service for tests and benchmarks: Tribunal's jobs API (``POST /v1/jobs``,
``GET /v1/jobs/{id}?wait=``) on real HTTP, scoring with a Python function after a fixed
latency. It stands in for a verifier whose behaviour a test must control (a reward a tiny
model can learn, an exact latency, an outage); everything on the trainer's side is real.
Its answers are built from the envelope's models (``JobCreated``, ``JobState``,
``ItemResult``, ``ErrorResponse``), so their shapes are the real service's."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from tribunal.testing.stack import free_port
from tribunal.wire.envelope import (
    ErrorBody,
    ErrorResponse,
    ItemError,
    ItemResult,
    JobCreated,
    JobState,
    VerifierInfo,
)

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

    As the real service, a repeated ``idempotency_key`` (per verifier) answers the job it
    made first with ``created: false``, or a 409 ``idempotency_conflict`` when it came with
    other items.
    """

    def __init__(self, score: ScoreFn, latency_s: float = 0.0) -> None:
        self.score = score
        self.latency_s = latency_s
        self.jobs: dict[str, dict[str, Any]] = {}
        self._job_of_key: dict[tuple[str, str], str] = {}
        self.items_scored = 0
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def _app(self) -> Any:
        from fastapi import FastAPI, Response

        app = FastAPI()

        def answer(model: BaseModel, status: int = 200) -> Response:
            return Response(model.model_dump_json(), status, media_type="application/json")

        @app.post("/v1/jobs")
        async def create(body: dict[str, Any]) -> Response:
            key = body.get("idempotency_key")
            earlier = self._job_of_key.get((body["verifier"], key)) if key else None
            if earlier is not None:
                if self.jobs[earlier]["items"] != body["items"]:
                    message = f"idempotency_key {key!r} was used for a different batch"
                    return answer(
                        ErrorResponse(
                            error=ErrorBody(
                                code="idempotency_conflict",
                                message=f"{message} (job {earlier})",
                                field="idempotency_key",
                            )
                        ),
                        409,
                    )
                return answer(JobCreated(job_id=earlier, created=False), 202)
            job_id = uuid.uuid4().hex
            self.jobs[job_id] = {
                "verifier": body["verifier"],
                "items": body["items"],
                "done_at": time.monotonic() + self.latency_s,
            }
            if key:
                self._job_of_key[(body["verifier"], key)] = job_id
            return answer(JobCreated(job_id=job_id, created=True), 202)

        @app.get("/v1/jobs/{job_id}")
        async def get(job_id: str, wait: float = 0.0) -> Response:
            job = self.jobs.get(job_id)
            if job is None:
                message = f"no job {job_id!r} (never created, or expired)"
                error = ErrorBody(code="job_not_found", message=message, field="job_id")
                return answer(ErrorResponse(error=error), 404)
            remaining = job["done_at"] - time.monotonic()
            if 0 < remaining <= wait:
                await asyncio.sleep(remaining)
            done = time.monotonic() >= job["done_at"]
            results: list[ItemResult | None] = [None] * len(job["items"])
            if done:
                results = [self._result(item) for item in job["items"]]
            if done and "counted" not in job:
                job["counted"] = True
                self.items_scored += len(job["items"])
            state = JobState(
                job_id=job_id,
                verifier=job["verifier"],
                status="done" if done else "pending",
                total=len(job["items"]),
                completed=len(job["items"]) if done else 0,
                results=results,
            )
            return answer(state)

        @app.get("/readyz")
        async def ready() -> dict[str, str]:
            return {"status": "ok"}

        return app

    def _result(self, item: dict[str, Any]) -> ItemResult:
        reward = self.score(item)
        error = None
        if reward is None:
            error = ItemError(code="bad_input", message="unscorable", retryable=False)
        elif isinstance(reward, str):
            error = ItemError(code=reward, message="failed", retryable=True)
            reward = None
        verifier = VerifierInfo(name="stand_in", version="1", config_hash="0" * 16)
        return ItemResult(id=item["id"], reward=reward, error=error, verifier=verifier)

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
