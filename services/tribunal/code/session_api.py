"""``/v1/code/sessions``: code-interpreter sessions over HTTP (routing: ``session_verifier``).

* ``POST /v1/code/sessions`` → :class:`SessionInfo` (201): a session on some worker.
* ``POST /v1/code/sessions/{session_id}/run`` → :class:`CellResult`: one cell.
* ``DELETE /v1/code/sessions/{session_id}`` → 204.

Errors are the API's one error body: ``sessions_full`` (429, retryable, Retry-After) when
the worker that took the start holds its cap, ``session_lost`` (410) for a session that is
gone (its worker stopped or died, idle TTL, budget, interpreter death, closed).
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from fastapi import APIRouter, Depends, Response
from fastapi import Path as PathParam

from tribunal.code.interp_role import INTERRUPT_GRACE_S
from tribunal.code.session_models import (
    CellRequest,
    CellResult,
    SessionCreateItem,
    SessionInfo,
    SessionRequest,
)
from tribunal.code.session_verifier import SESSION_VERIFIER, owner_stream
from tribunal.core.deps import AppRuntime, RuntimeDep, require_api_key
from tribunal.core.queue.base import QueuedItem
from tribunal.core.routes.body import JSONRoute
from tribunal.core.routes.responses import ERROR_RESPONSES
from tribunal.wire.envelope import ErrorResponse
from tribunal.wire.errors import (
    ERRORS_BY_CODE,
    ConfigurationError,
    InternalError,
    ScoringTimeout,
    SessionLost,
)

_SESSION_ID = re.compile(r"^([0-9a-f]{16})\.[A-Za-z0-9_-]{24}$")
_ANSWER_MARGIN_S = 10.0
"""Beyond a call's own limit: the queue's round trips and the owner's answer (s)."""

SESSION_RESPONSES: dict[int | str, dict[str, Any]] = {
    **ERROR_RESPONSES,
    410: {"model": ErrorResponse, "description": "The session is gone (session_lost)."},
    429: {
        "model": ErrorResponse,
        "description": "The worker holds its cap of sessions (sessions_full), or the queue "
        "is full (queue_full); retry after Retry-After seconds.",
    },
}

router = APIRouter(
    prefix="/v1/code/sessions",
    tags=["code"],
    dependencies=[Depends(require_api_key)],
    route_class=JSONRoute,
)

SessionIdParam = PathParam(max_length=64, description="As `POST /v1/code/sessions` returned.")


@router.post(
    "",
    response_model=SessionInfo,
    status_code=201,
    operation_id="code_session_start",
    responses=SESSION_RESPONSES,
)
async def start_session(body: SessionRequest, runtime: RuntimeDep) -> SessionInfo:
    """Start a sandboxed Python interpreter that keeps its state between calls.

    Same isolation and limits as `POST /v1/code/run` (bubblewrap, rlimits, seccomp, memory
    cgroup), one sandbox per session; an idle TTL, a time budget over all calls, and a cap
    of sessions per worker (the next start is `sessions_full`, retryable)."""
    return await open_session(runtime, body.idle_ttl_s, body.budget_s)


@router.post(
    "/{session_id}/run",
    response_model=CellResult,
    operation_id="code_session_run",
    responses=SESSION_RESPONSES,
)
async def run_cell(
    body: CellRequest, runtime: RuntimeDep, session_id: str = SessionIdParam
) -> CellResult:
    """Run one cell in the session's interpreter: its stdout, stderr, the repr of its last
    expression (`display`), its exception (`error`) and whether the session lives on."""
    return await run_in_session(runtime, session_id, body)


@router.delete(
    "/{session_id}",
    status_code=204,
    response_class=Response,
    operation_id="code_session_close",
    responses=SESSION_RESPONSES,
)
async def close_session(runtime: RuntimeDep, session_id: str = SessionIdParam) -> Response:
    """Close the session: its sandbox is killed and its files are gone."""
    await close_owned(runtime, session_id)
    return Response(status_code=204)


async def open_session(
    runtime: AppRuntime, idle_ttl_s: float | None = None, budget_s: float | None = None
) -> SessionInfo:
    """Start a session on whichever worker claims the start (each limit at most the server's).

    Raises:
        SessionsFull: That worker holds its cap (retryable).
        ConfigurationError: Sessions are off here (``TRIBUNAL_CODE_MAX_SESSIONS=0``).
    """
    item = SessionCreateItem(id="session", idle_ttl_s=idle_ttl_s, budget_s=budget_s)
    service = runtime.services.get(SESSION_VERIFIER)
    if service is None:
        raise ConfigurationError("sessions are off on this server (TRIBUNAL_CODE_MAX_SESSIONS=0)")
    text = await service.score([item], runtime.settings.sync_timeout_s)
    [result] = json.loads(text)["results"]
    _raise_error(result)
    return SessionInfo.model_validate(result["details"])


async def run_in_session(runtime: AppRuntime, session_id: str, cell: CellRequest) -> CellResult:
    """Run one cell on the session's owner (see :func:`call_owner`)."""
    wait = (cell.timeout_s or 0.0) + INTERRUPT_GRACE_S + _ANSWER_MARGIN_S
    payload = {"op": "run", "cell": cell.model_dump(mode="json")}
    return CellResult.model_validate(await call_owner(runtime, session_id, payload, wait))


async def close_owned(runtime: AppRuntime, session_id: str) -> None:
    """Close the session on its owner."""
    await call_owner(runtime, session_id, {"op": "close"}, _ANSWER_MARGIN_S)


async def call_owner(
    runtime: AppRuntime, session_id: str, payload: dict[str, Any], wait_s: float
) -> dict[str, Any]:
    """Send one call to the worker that holds ``session_id`` and return its ``details``.

    The call is a one-item job on the owner's own stream; the owner's heartbeat is checked
    before it is sent and each second while it is awaited.

    Raises:
        SessionLost: No such session, or its owner has no heartbeat (stopped or died).
        ScoringTimeout: No answer within ``wait_s`` plus the call's own limit (the owner is
            alive but busy).
        TribunalError: The error the owner answered (``session_lost``, ``bad_input`` ...).
    """
    match = _SESSION_ID.match(session_id)
    if match is None:
        raise SessionLost(f"no session {session_id!r} (not a session id)", field="session_id")
    stream = owner_stream(match.group(1))
    queue = runtime.queue
    window_s = max(3 * runtime.settings.worker_heartbeat_s, 5.0)
    if await queue.live_workers(stream, window_s) == 0:
        raise _owner_gone(session_id, window_s)
    item = QueuedItem(0, {"session_id": session_id, **payload})
    job = await queue.submit(stream, [item], total=1, prefilled={})
    deadline = asyncio.get_running_loop().time() + wait_s
    while True:
        record = await queue.wait(job.job_id, 1.0)
        if record.is_done:
            result = json.loads(record.results[0])
            _raise_error(result)
            details: dict[str, Any] = result["details"]
            return details
        if await queue.live_workers(stream, window_s) == 0:
            raise _owner_gone(session_id, window_s)
        if asyncio.get_running_loop().time() > deadline:
            raise ScoringTimeout(
                f"session {session_id!r}: its worker is alive but did not answer in {wait_s:g} s",
                job_id=job.job_id,
            )


def _owner_gone(session_id: str, window_s: float) -> SessionLost:
    return SessionLost(
        f"session {session_id!r} is lost: the worker that held it stopped or died (no "
        f"heartbeat for {window_s:g} s); its state is gone, start a new session",
        field="session_id",
    )


def _raise_error(result: dict[str, Any]) -> None:
    error = result.get("error")
    if error is not None:
        cls = ERRORS_BY_CODE.get(error["code"], InternalError)
        # An item error carries no Retry-After: a refused start is worth retrying in 1 s.
        retry_after_s = 1.0 if cls.retryable else None
        raise cls(error["message"], field=error.get("field"), retry_after_s=retry_after_s)
