"""SandboxFusion's ``POST /run_jupyter`` on code-interpreter sessions.

SandboxFusion (bytedance/SandboxFusion, ``sandbox/server/sandbox_api.py`` and
``runtime/jupyter/main.py``) runs a request's ``cells`` one after the other in a fresh
Jupyter kernel and answers each cell's ``stdout``, ``stderr``, ``display`` (the kernel's
``execute_result`` / ``display_data`` bundles) and ``error`` (the kernel's ``error`` content:
``ename``, ``evalue``, ``traceback`` as a list of lines). Here the kernel is a session
(:mod:`tribunal.code.sessions`), started for the request and closed after it:

- ``display``: ``[{"text/plain": repr}]`` for a cell whose last expression is not None (the
  repr a kernel's ``execute_result`` carries), else ``[]``;
- ``error``: ``[{"ename", "evalue", "traceback": [lines]}]`` for a cell that raised; the next
  cells still run, as in SandboxFusion;
- ``total_timeout`` is the session's time budget and ``cell_timeout`` (0: none) each cell's
  limit within it; a cell past its limit ends the request ``Failed`` with the cells run so far
  and ``driver.status`` ``TimeLimitExceeded`` (SandboxFusion's kernel driver is killed then);
  an interpreter that died is ``Failed`` with ``driver.status`` ``Error``;
- ``files`` and ``fetch_files`` must be empty (``SandboxError`` naming them, as ``/run_code``);
  ``memory_limit_MB`` is accepted and not used: a session's memory is the server's
  (``TRIBUNAL_CODE_MAX_MEMORY_MB``);
- a worker at its cap of sessions is Tribunal's 429 ``sessions_full`` (the SDK retries).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from tribunal.code.sandbox_fusion import CommandRunResult, CommandRunStatus, RunStatus
from tribunal.code.session_api import (
    SESSION_RESPONSES,
    close_owned,
    open_session,
    run_in_session,
)
from tribunal.code.session_models import CellRequest, CellResult
from tribunal.core.deps import RuntimeDep, require_api_key
from tribunal.core.routes.body import JSONRoute
from tribunal.wire.code import MAX_CODE_CHARS
from tribunal.wire.errors import SandboxError, SessionLost, TribunalError

MAX_CELLS = 1000


class RunJupyterRequest(BaseModel):
    """SandboxFusion's ``RunJupyterRequest`` (with ``memory_limit_MB``, its server's too)."""

    model_config = ConfigDict(extra="forbid")

    cells: list[str] = Field(max_length=MAX_CELLS, description="Code cells, run in order.")
    cell_timeout: float = Field(default=0, ge=0, description="Limit of each cell, s (0: none).")
    total_timeout: float = Field(default=45, gt=0, description="Limit of all the cells, s.")
    memory_limit_MB: int = Field(default=-1, description="Accepted, not used.")
    kernel: Literal["python3"] = "python3"
    files: dict[str, str | None] = Field(default_factory=dict, description="Must be empty.")
    fetch_files: list[str] = Field(default_factory=list, description="Must be empty.")


class CellRunResult(BaseModel):
    """SandboxFusion's ``CellRunResult``."""

    stdout: str
    stderr: str
    display: list[dict[str, Any]]
    error: list[dict[str, Any]]


class RunJupyterResponse(BaseModel):
    """SandboxFusion's ``RunJupyterResponse``."""

    status: RunStatus
    message: str
    driver: CommandRunResult | None = None
    cells: list[CellRunResult] = Field(default_factory=list)
    executor_pod_name: str | None = None
    files: dict[str, str] = Field(default_factory=dict)


def to_cell(result: CellResult) -> CellRunResult:
    """A session cell's result in SandboxFusion's terms."""
    display = [] if result.display is None else [{"text/plain": result.display}]
    error = []
    if result.error is not None:
        error = [
            {
                "ename": result.error.ename,
                "evalue": result.error.evalue,
                "traceback": result.error.traceback.splitlines(),
            }
        ]
    return CellRunResult(stdout=result.stdout, stderr=result.stderr, display=display, error=error)


router = APIRouter(
    tags=["sandbox-fusion"], dependencies=[Depends(require_api_key)], route_class=JSONRoute
)


@router.post(
    "/run_jupyter",
    response_model=RunJupyterResponse,
    operation_id="sandbox_fusion_run_jupyter",
    responses=SESSION_RESPONSES,
)
async def run_jupyter(body: RunJupyterRequest, runtime: RuntimeDep) -> RunJupyterResponse:
    """SandboxFusion's `/run_jupyter`: the cells in one code-interpreter session, answered in
    SandboxFusion's shape (see the module's docstring for what maps to what)."""
    for name in ("files", "fetch_files"):
        if getattr(body, name):
            message = f"{name}: Tribunal's sandbox takes no files"
            return RunJupyterResponse(status=RunStatus.SANDBOX_ERROR, message=message)
    if any(len(cell) > MAX_CODE_CHARS for cell in body.cells):
        message = f"cells: a cell is longer than {MAX_CODE_CHARS} characters"
        return RunJupyterResponse(status=RunStatus.SANDBOX_ERROR, message=message)
    started = time.perf_counter()
    try:
        session = await open_session(runtime, budget_s=body.total_timeout)
    except TribunalError as exc:
        if exc.retryable and not isinstance(exc, SandboxError):
            raise
        return RunJupyterResponse(status=RunStatus.SANDBOX_ERROR, message=str(exc))
    cells: list[CellRunResult] = []
    status = CommandRunStatus.FINISHED
    try:
        for code in body.cells:
            left = body.total_timeout - (time.perf_counter() - started)
            limit = min(body.cell_timeout or left, left)
            if limit <= 0:
                status = CommandRunStatus.TIME_LIMIT_EXCEEDED
                break
            result = await run_in_session(
                runtime, session.session_id, CellRequest(code=code, timeout_s=limit)
            )
            cells.append(to_cell(result))
            if result.status == "timeout":
                status = CommandRunStatus.TIME_LIMIT_EXCEEDED
                break
            if result.status == "crashed":
                status = CommandRunStatus.ERROR
                break
    except (SandboxError, SessionLost) as exc:
        return RunJupyterResponse(status=RunStatus.SANDBOX_ERROR, message=str(exc), cells=cells)
    finally:
        with contextlib.suppress(SessionLost):  # ended already: died, or out of budget
            await close_owned(runtime, session.session_id)
    driver = CommandRunResult(
        status=status,
        execution_time=time.perf_counter() - started,
        return_code=0 if status is CommandRunStatus.FINISHED else None,
    )
    ok = status is CommandRunStatus.FINISHED
    return RunJupyterResponse(
        status=RunStatus.SUCCESS if ok else RunStatus.FAILED, message="", driver=driver, cells=cells
    )
