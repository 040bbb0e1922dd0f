"""``/healthz`` (the process answers), ``/readyz`` (queue and workers), ``/metrics``."""

from __future__ import annotations

import contextlib
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from tribunal.core.deps import RuntimeDep
from tribunal.wire.errors import QueueUnavailable

router = APIRouter(tags=["health"])


@router.get("/healthz", operation_id="healthz")
async def healthz() -> dict[str, str]:
    """Liveness: the process serves HTTP. Does not touch the queue."""
    return {"status": "ok"}


@router.get("/readyz", operation_id="readyz", responses={503: {"description": "Not ready."}})
async def readyz(runtime: RuntimeDep) -> JSONResponse:
    """Readiness: the queue answers and every verifier has at least one live worker. A
    verifier without one whose workers refused to start says why (`refused.<verifier>`)."""
    checks: dict[str, Any] = {"queue": runtime.queue.name}
    # A verifier that isolates programs says which layers its configuration asks for
    # (`layers.<verifier>`; its workers refuse to start when the host cannot give them).
    for name, service in runtime.services.items():
        layers = getattr(service.verifier, "layers", None)
        if layers is not None:
            checks[f"layers.{name}"] = layers
    ready = True
    try:
        await runtime.queue.ping()
        for name in runtime.services:
            live = await runtime.queue.live_workers(name, runtime.metrics.worker_window_s)
            checks[f"workers.{name}"] = live
            ready = ready and live > 0
            refusal = await runtime.queue.refusal(name) if live == 0 else None
            if refusal is not None:
                checks[f"refused.{name}"] = refusal
    except QueueUnavailable as exc:
        checks["error"] = exc.message
        ready = False
    status = "ready" if ready else "not_ready"
    return JSONResponse({"status": status, "checks": checks}, status_code=200 if ready else 503)


@router.get("/metrics", operation_id="metrics", response_class=Response)
async def metrics(runtime: RuntimeDep) -> Response:
    """Prometheus metrics: queue depth, live workers, items scored, errors by class, cache
    hits (cluster-wide) and request latency (this process)."""
    # Also the stores' sizes and Redis's memory (cluster-wide) and error answers (this
    # process): docs/operations.md. Not in the docstring, which is the OpenAPI document's.
    # Serve the last snapshot when Redis is down: a scrape must not fail because of it.
    with contextlib.suppress(QueueUnavailable):
        caches = {name: service.cache for name, service in runtime.services.items()}
        await runtime.metrics.refresh(runtime.queue, caches)
    return Response(runtime.metrics.render(), media_type=CONTENT_TYPE_LATEST)
