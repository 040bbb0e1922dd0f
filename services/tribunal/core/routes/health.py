"""``/healthz`` (the process answers), ``/readyz`` (queue and workers), ``/metrics``."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from tribunal.core.deps import RuntimeDep
from tribunal.core.verifier import DescribesLayers, ProbesReadiness
from tribunal.wire.errors import QueueUnavailable

logger = logging.getLogger(__name__)

router = APIRouter(tags=["health"])


@router.get("/healthz", operation_id="healthz")
async def healthz() -> dict[str, str]:
    """Liveness: the process serves HTTP. Does not touch the queue."""
    return {"status": "ok"}


@router.get(
    "/readyz",
    operation_id="readyz",
    responses={
        200: {"description": "Takes work: `ready`, or `degraded` with `reasons`."},
        503: {"description": "Not ready: `not_ready` with `reasons`."},
    },
)
async def readyz(runtime: RuntimeDep) -> JSONResponse:
    """Readiness: `{"status", "reasons", "checks"}`. `not_ready` (503): the queue does not
    answer or a verifier has no live worker (one whose workers refused to start says why,
    `refused.<verifier>`). `degraded` (200): the service takes work, but some of it cannot
    be scored now: an LLM backend unset or unreachable, a verifier of the gateway down.
    `ready` (200): neither. `reasons` says why, one sentence each."""
    checks: dict[str, Any] = {"queue": runtime.queue.name}
    # A verifier that isolates programs says which layers its configuration asks for
    # (`layers.<verifier>`; its workers refuse to start when the host cannot give them).
    for name, service in runtime.services.items():
        if isinstance(service.verifier, DescribesLayers):
            checks[f"layers.{name}"] = service.verifier.layers
    blocking: list[str] = []
    try:
        await runtime.queue.ping()
        for name in runtime.services:
            live = await runtime.queue.live_workers(name, runtime.metrics.worker_window_s)
            checks[f"workers.{name}"] = live
            refusal = await runtime.queue.refusal(name) if live == 0 else None
            if refusal is not None:
                checks[f"refused.{name}"] = refusal
            if live == 0:
                blocking.append(f"{name}: no live worker" + (f" ({refusal})" if refusal else ""))
    except QueueUnavailable as exc:
        checks["error"] = exc.message
        blocking.append(f"queue: {exc.message}")
    if blocking:
        return _readiness("not_ready", blocking, checks, 503)
    probes = [
        service.verifier.unready_reasons()
        for service in runtime.services.values()
        if isinstance(service.verifier, ProbesReadiness)
    ]
    degraded = [reason for found in await asyncio.gather(*probes) for reason in found]
    return _readiness("degraded" if degraded else "ready", degraded, checks, 200)


def _readiness(status: str, reasons: list[str], checks: dict[str, Any], code: int) -> JSONResponse:
    return JSONResponse({"status": status, "reasons": reasons, "checks": checks}, code)


@router.get("/metrics", operation_id="metrics", response_class=Response)
async def metrics(runtime: RuntimeDep) -> Response:
    """Prometheus metrics: queue depth, live workers, items scored, errors by class, cache
    hits (cluster-wide) and request latency (this process)."""
    # Also the stores' sizes and Redis's memory (cluster-wide) and error answers (this
    # process): docs/operations.md. Not in the docstring, which is the OpenAPI document's.
    # Serve the last snapshot when Redis is down: a scrape must not fail because of it.
    try:
        caches = {name: service.cache for name, service in runtime.services.items()}
        await runtime.metrics.refresh(runtime.queue, caches)
    except QueueUnavailable as exc:
        logger.warning("metrics served from the last snapshot: %s", exc.message)
    return Response(runtime.metrics.render(), media_type=CONTENT_TYPE_LATEST)
