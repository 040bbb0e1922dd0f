"""``create_app``: the HTTP app of one service, with its routes, errors and lifespan.

At start-up the lifespan builds the queue (Redis, or the embedded queue when Redis does not
answer and ``TRIBUNAL_QUEUE=auto``). With the embedded queue the app also starts its
verifiers and runs their workers in-process, since no other process can reach its queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi_offline import FastAPIOffline
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from tribunal.core.deps import AppRuntime
from tribunal.core.inspection.routes import inspect_router
from tribunal.core.inspection.store import InspectRecorder, build_inspect_store, recorder_for
from tribunal.core.metrics import Metrics
from tribunal.core.middleware import BodyLimitMiddleware
from tribunal.core.offload import off_loop_if_large
from tribunal.core.queue.base import JobQueue
from tribunal.core.queue.factory import build_cache, build_queue
from tribunal.core.request_models import (
    job_body_type,
    job_state_type,
    score_request_model,
    score_response_type,
)
from tribunal.core.routes import health, jobs
from tribunal.core.routes.body import body_errors
from tribunal.core.routes.score import score_router
from tribunal.core.scoring import ScoringService
from tribunal.core.service import ServiceSpec
from tribunal.core.settings import CoreSettings
from tribunal.core.verifier import AttachesQueue, Verifier
from tribunal.core.worker import WorkerRuntime
from tribunal.wire.errors import (
    BackendUnavailable,
    ConfigurationError,
    InternalError,
    QueueUnavailable,
    TribunalError,
)
from tribunal.wire.hashing import SURROGATE_MESSAGE, lone_surrogate, printable

logger = logging.getLogger(__name__)

_HTTP_CODES = {
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
}


def create_app(spec: ServiceSpec, settings: CoreSettings | None = None) -> FastAPI:
    """Build the HTTP app of ``spec``.

    Args:
        spec: The service (its verifiers and extra routes).
        settings: Its settings; read from ``TRIBUNAL_*`` environment variables when omitted.

    Returns:
        The app. Its lifespan connects the queue; nothing is connected before it runs.
    """
    settings = settings or spec.settings()
    verifiers = spec.create_verifiers(settings)
    request_models = {v.name: score_request_model(v) for v in verifiers}

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with _runtime(settings, verifiers, request_models) as runtime:
            app.state.runtime = runtime
            async with mounted:
                yield

    # /docs serves Swagger UI's assets from the package, not a CDN: it works offline.
    app = FastAPIOffline(
        title=f"Tribunal {spec.name}",
        version="0.1.0",
        summary=f"Tribunal's {spec.name} reward service.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.add_middleware(
        BodyLimitMiddleware,
        max_bytes=settings.max_request_bytes,
        api_key=settings.api_key_value,
    )
    _add_error_handlers(app, {v.name for v in verifiers})
    app.include_router(health.router)
    for verifier in verifiers:
        if spec.score_routes is None or verifier.name in spec.score_routes:
            app.include_router(
                score_router(
                    verifier.name, request_models[verifier.name], score_response_type(verifier)
                )
            )
    for router in spec.routers():
        app.include_router(router)
    mounted = spec.mount(app)
    app.include_router(jobs.jobs_router(job_body_type(verifiers), job_state_type(verifiers)))
    app.include_router(inspect_router())
    return app


@contextlib.asynccontextmanager
async def _runtime(
    settings: CoreSettings,
    verifiers: Sequence[Verifier],
    request_models: dict[str, type[BaseModel]],
) -> AsyncIterator[AppRuntime]:
    queue = await build_queue(settings)
    window_s = max(3 * settings.worker_heartbeat_s, 5.0)
    inspect = build_inspect_store(settings, queue)
    # Recorders of the items this process answers or scores: cache hits (answered here), its
    # embedded workers', and the gateway's synchronous routes (which score here).
    recorders = {
        v.name: recorder
        for v in verifiers
        if (recorder := recorder_for(settings, inspect, v.name, queue.incr_stats)) is not None
    }
    services = {
        v.name: ScoringService(
            v,
            queue,
            build_cache(settings, queue, v.name),
            settings.max_batch_items,
            request_models[v.name],
            worker_window_s=window_s,
            recorder=recorders.get(v.name),
        )
        for v in verifiers
    }
    metrics = Metrics(list(services), worker_window_s=window_s)
    runtime = AppRuntime(
        settings=settings,
        queue=queue,
        services=services,
        metrics=metrics,
        inspect=inspect,
        recorders=recorders,
    )
    stop = asyncio.Event()
    tasks: list[asyncio.Task[None]] = []
    try:
        if queue.in_process:
            tasks = await _start_embedded_workers(
                settings, verifiers, queue, services, stop, recorders
            )
        else:
            for verifier in verifiers:
                try:
                    await queue.ensure_verifier(verifier.name)
                except QueueUnavailable as exc:
                    # The workers create it when Redis is back; submissions wait for Redis.
                    logger.warning("queue of %s not created: %s", verifier.name, exc.message)
        yield runtime
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        for recorder in recorders.values():  # what was scored last is kept too
            await recorder.aclose()
        if queue.in_process:
            for verifier in verifiers:
                await verifier.aclose()
        await queue.aclose()


async def _start_embedded_workers(
    settings: CoreSettings,
    verifiers: Sequence[Verifier],
    queue: JobQueue,
    services: dict[str, ScoringService],
    stop: asyncio.Event,
    recorders: dict[str, InspectRecorder],
) -> list[asyncio.Task[None]]:
    """Start each verifier and its in-process worker. A verifier that refuses to start
    (``ConfigurationError``) stays down without taking the app with it: its refusal is
    logged once and recorded in the queue, where ``/readyz`` and submissions report it."""
    tasks = []
    refused: dict[str, list[str]] = {}
    for verifier in verifiers:
        try:
            await verifier.start()
        except ConfigurationError as exc:
            refused.setdefault(exc.message, []).append(verifier.name)
            await queue.set_refusal(verifier.name, exc.message)
            continue
        if isinstance(verifier, AttachesQueue):  # audits (gateway), shared rate limits (judge)
            verifier.attach_queue(queue, settings.sync_timeout_s)
        worker = WorkerRuntime(
            verifier,
            queue,
            services[verifier.name].cache,
            batch_size=settings.worker_batch_size,
            concurrency=settings.worker_concurrency,
            max_deliveries=settings.max_deliveries,
            heartbeat_s=settings.worker_heartbeat_s,
            grace_s=settings.worker_grace_s,
            recorder=recorders.get(verifier.name),
        )
        tasks.append(asyncio.create_task(worker.run(stop), name=f"worker-{verifier.name}"))
    for message, names in refused.items():
        logger.error("%s refused to start: %s", ", ".join(names), message)
    return tasks


def _error_response(
    status: int,
    code: str,
    message: str,
    field: str | None,
    retryable: bool,
    retry_after_s: float | None = None,
    job_id: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """The one error body of the API: ``{"error": ErrorBody}`` (message and field escaped
    where UTF-8 cannot encode them)."""
    all_headers = dict(headers or {})
    if retry_after_s:
        all_headers["Retry-After"] = str(max(1, round(retry_after_s)))
    body = {
        "error": {
            "code": code,
            "message": printable(message),
            "field": None if field is None else printable(field),
            "retryable": retryable,
            "job_id": job_id,
        }
    }
    return JSONResponse(body, status_code=status, headers=all_headers or None)


def _json_error(exc: RequestValidationError, error: Mapping[str, Any]) -> str:
    cause = exc.__cause__
    where = (
        f" at line {cause.lineno} column {cause.colno}"
        if isinstance(cause, json.JSONDecodeError)
        else ""
    )
    return f"body: invalid JSON{where}: {error.get('ctx', {}).get('error', '')}".rstrip(": ")


def _validation_field(request: Request, loc: Sequence[Any], tags: set[str]) -> str | None:
    parts = [str(part) for part in loc if part != "body"]
    # /v1/jobs is a union tagged by `verifier`: pydantic puts the tag first in the location.
    if request.url.path.rstrip("/") == "/v1/jobs" and parts and parts[0] in tags:
        parts = parts[1:]
    return ".".join(parts) or None


def _body_level_error(request: Request, message: str) -> tuple[str, str]:
    content_type = request.headers.get("content-type", "")
    if content_type and "json" not in content_type.lower():
        return (
            "content-type",
            f"content-type: {content_type!r} is not JSON; send the body as JSON with "
            "'Content-Type: application/json'",
        )
    return "body", f"body: {message}"


def _unparsable_body(exc: StarletteHTTPException) -> str | None:
    """The message for a body FastAPI could not parse (it answers a bare 400), or None."""
    if exc.status_code != 400:
        return None
    cause = exc.__cause__
    if isinstance(cause, UnicodeDecodeError):
        return f"body: not valid UTF-8 (byte {cause.start}): send JSON encoded as UTF-8"
    if isinstance(cause, RecursionError):
        return "body: JSON nested too deeply to parse"
    if cause is not None:
        return f"body: could not be parsed as JSON ({type(cause).__name__})"
    return None


def _count_error(request: Request, code: str) -> None:
    """Add an error answer to ``tribunal_request_errors`` (before start-up there is none)."""
    runtime = getattr(request.app.state, "runtime", None)
    if runtime is not None:
        runtime.metrics.request_errors.labels(code).inc()


def _add_error_handlers(app: FastAPI, tags: set[str]) -> None:
    @app.exception_handler(TribunalError)
    async def tribunal_error(request: Request, exc: TribunalError) -> JSONResponse:
        _count_error(request, exc.code)
        # A dependency that is down (queue, backend, a refused verifier) was said once where
        # it went down; logging it again per request would flood the log.
        if exc.http_status >= 500 and not isinstance(exc, BackendUnavailable):
            logger.error("%s: %s", exc.code, exc.message)
        return _error_response(
            exc.http_status,
            exc.code,
            exc.message,
            exc.field,
            exc.retryable,
            exc.retry_after_s,
            exc.job_id,
        )

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        _count_error(request, "bad_input")
        errors, body = list(exc.errors()), exc.body
        large = body_errors(request)
        if large is not None:
            # The body was validated off the loop; FastAPI's errors of it are a stand-in's.
            errors = [e for e in errors if tuple(e.get("loc", ()))[:1] != ("body",)]
            errors, body = errors + large.errors, large.body
        first = errors[0]
        if first.get("type") == "json_invalid":
            return _error_response(422, "bad_input", _json_error(exc, first), "body", False)
        field = _validation_field(request, first.get("loc", ()), tags)
        msg = str(first.get("msg"))
        # Text that is not Unicode in a request's own key or tag fails as something else (a
        # missing tag, a tag that matches none, a body that is no string) naming no field:
        # the surrogate is the cause, and its path the field. The search walks the whole
        # body: off the loop where the body is large.
        size = large.size if large is not None else int(request.headers.get("content-length") or 0)
        surrogate = await off_loop_if_large(size, lone_surrogate, body)
        if surrogate:
            field = ".".join(printable(str(part)) for part in surrogate)
            msg = SURROGATE_MESSAGE
        if field is None:
            field, message = _body_level_error(request, msg)
        else:
            message = f"{field}: {msg}"
        return _error_response(422, "bad_input", message, field, False)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        unparsable = _unparsable_body(exc)
        _count_error(
            request, "bad_input" if unparsable else _HTTP_CODES.get(exc.status_code, "http_error")
        )
        if unparsable is not None:
            return _error_response(422, "bad_input", unparsable, "body", False)
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        return _error_response(
            exc.status_code, code, str(exc.detail), None, False, headers=exc.headers
        )

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("unhandled error on %s %s", request.method, request.url.path)
        _count_error(request, InternalError.code)
        error = InternalError("internal error; see the service's logs")
        return _error_response(500, error.code, error.message, None, False)
