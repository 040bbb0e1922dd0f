"""SandboxFusion's ``POST /run_code`` on the code service: the same sandbox, slots and queue as
``POST /v1/code/run``, behind the request and response models of SandboxFusion
(bytedance/SandboxFusion, ``sandbox/server/sandbox_api.py``; the ``sandbox-fusion`` SDK's
``RunCodeRequest`` / ``RunCodeResponse``), so that the SDK, verl's ``sandbox_fusion`` reward
utilities and agent frameworks that speak it can be pointed at Tribunal's code URL unchanged.

What maps to what:

- ``language``: ``python`` and ``cpp`` run; any other of SandboxFusion's languages is answered
  ``status: SandboxError`` with a message naming it (the SDK raises with that message).
- ``run_timeout`` (s) and ``memory_limit_MB`` become the run's limits, clamped to the service's
  maxima like every limit; ``stdin: null`` is no input.
- ``compile_timeout`` is accepted and not used: C++ compiles under the service's own limit
  (``TRIBUNAL_CODE_COMPILE_TIMEOUT_S``, 30 s by default; SandboxFusion's default is 10 s).
- Text that is not Unicode (a lone surrogate escape such as ``"\\ud800"`` in any string or
  key) is Tribunal's 422 naming the field, like every route's.
- ``files`` and ``fetch_files`` must be empty: the sandbox takes no files (refused by name).
- The answer: ``Success`` when the program exited 0 within its limits, ``Failed`` otherwise,
  with ``run_result`` (``Finished`` or ``TimeLimitExceeded``, return code, stdout, stderr,
  execution time in seconds) and, for C++, ``compile_result``; a compile error has a
  ``compile_result`` with return code 1 and no ``run_result``. A failure of the sandbox itself
  is ``SandboxError`` with its message, as SandboxFusion answers it (HTTP 200).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from tribunal.code.runs import run_once
from tribunal.core.deps import RuntimeDep, require_api_key
from tribunal.core.routes.body import JSONRoute
from tribunal.core.routes.responses import ERROR_RESPONSES
from tribunal.wire.code import MAX_CODE_CHARS, Limits, RunDetails, RunItem
from tribunal.wire.code_verdicts import TestVerdict
from tribunal.wire.errors import BadInput, SandboxError, TribunalError
from tribunal.wire.hashing import SURROGATE_MESSAGE, lone_surrogate, printable

LANGUAGES = {"python": "python", "cpp": "cpp"}
"""SandboxFusion's language names that Tribunal runs, and its own name for each."""


class RunCodeRequest(BaseModel):
    """SandboxFusion's ``RunCodeRequest`` (plus ``memory_limit_MB``, which verl sends)."""

    model_config = ConfigDict(extra="forbid")

    code: str = Field(max_length=MAX_CODE_CHARS, description="The program.")
    language: str = Field(description="`python` or `cpp` (others are refused by name).")
    stdin: str | None = Field(default=None, description="Fed to the program; null is none.")
    compile_timeout: float = Field(default=10, gt=0, description="Accepted, not used.")
    run_timeout: float = Field(default=10, gt=0, description="Wall-clock limit, seconds.")
    memory_limit_MB: int | None = Field(default=None, gt=0, description="Memory limit, MiB.")
    files: dict[str, str | None] = Field(default_factory=dict, description="Must be empty.")
    fetch_files: list[str] = Field(default_factory=list, description="Must be empty.")

    @model_validator(mode="before")
    @classmethod
    def _valid_text(cls, data: Any) -> Any:
        # A lone surrogate passes JSON and str but is no Unicode text: the run item built
        # from it failed its own check inside the route (a 500). Refused here, by name.
        found = lone_surrogate(data)
        if found is not None:
            where = ".".join(str(part) for part in found) or "the body"
            raise ValueError(f"{printable(where)} {SURROGATE_MESSAGE}")
        return data


class CommandRunStatus(StrEnum):
    """How one command (compile or run) ended."""

    FINISHED = "Finished"
    ERROR = "Error"
    TIME_LIMIT_EXCEEDED = "TimeLimitExceeded"


class RunStatus(StrEnum):
    """The overall answer."""

    SUCCESS = "Success"
    FAILED = "Failed"
    SANDBOX_ERROR = "SandboxError"


class CommandRunResult(BaseModel):
    """SandboxFusion's ``CommandRunResult``; times in seconds."""

    status: CommandRunStatus
    execution_time: float | None = None
    return_code: int | None = None
    stdout: str | None = None
    stderr: str | None = None


class RunCodeResponse(BaseModel):
    """SandboxFusion's ``RunCodeResponse``."""

    status: RunStatus
    message: str
    compile_result: CommandRunResult | None = None
    run_result: CommandRunResult | None = None
    executor_pod_name: str | None = None
    files: dict[str, str] = Field(default_factory=dict)


def to_run_item(request: RunCodeRequest) -> RunItem:
    """The Tribunal run of a SandboxFusion request.

    Raises:
        BadInput: ``language`` is not one Tribunal runs, ``files`` / ``fetch_files`` are
            not empty, or a value the run item refuses (each names its field).
    """
    language = LANGUAGES.get(request.language)
    if language is None:
        raise BadInput(
            f"language {request.language!r} is not run by Tribunal's sandbox "
            f"(it runs {', '.join(sorted(LANGUAGES))})",
            field="language",
        )
    for name in ("files", "fetch_files"):
        if getattr(request, name):
            raise BadInput(f"{name}: Tribunal's sandbox takes no files", field=name)
    limits: dict[str, Any] = {"timeout_s": float(request.run_timeout)}
    if request.memory_limit_MB is not None:
        limits["memory_mb"] = request.memory_limit_MB
    try:
        return RunItem(
            id="run_code",
            language=language,
            code=request.code,
            stdin=request.stdin or "",
            limits=Limits(**limits),
        )
    except ValidationError as exc:  # what the request's own checks let through: its field
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"]) or "body"
        raise BadInput(f"{field}: {error['msg']}", field=field) from exc


def to_response(details: RunDetails, language: str) -> RunCodeResponse:
    """SandboxFusion's answer for a finished run."""
    seconds = None if details.time_ms is None else details.time_ms / 1000
    if details.verdict is TestVerdict.COMPILE_ERROR:
        compiled = CommandRunResult(
            status=CommandRunStatus.FINISHED,
            return_code=1,
            stdout=details.stdout,
            stderr=details.stderr,
            execution_time=seconds,
        )
        return RunCodeResponse(status=RunStatus.FAILED, message="", compile_result=compiled)
    timed_out = details.verdict is TestVerdict.TIME_LIMIT
    run = CommandRunResult(
        status=CommandRunStatus.TIME_LIMIT_EXCEEDED if timed_out else CommandRunStatus.FINISHED,
        return_code=details.exit_code,
        stdout=details.stdout,
        stderr=details.stderr,
        execution_time=seconds,
    )
    ok = details.verdict is TestVerdict.ACCEPTED
    return RunCodeResponse(
        status=RunStatus.SUCCESS if ok else RunStatus.FAILED,
        message="",
        compile_result=(
            CommandRunResult(status=CommandRunStatus.FINISHED, return_code=0)
            if language == "cpp"
            else None
        ),
        run_result=run,
    )


router = APIRouter(
    tags=["sandbox-fusion"], dependencies=[Depends(require_api_key)], route_class=JSONRoute
)


@router.post(
    "/run_code",
    response_model=RunCodeResponse,
    operation_id="sandbox_fusion_run_code",
    responses=ERROR_RESPONSES,
)
async def run_code(body: RunCodeRequest, runtime: RuntimeDep) -> RunCodeResponse:
    """SandboxFusion's `/run_code`: one program in Tribunal's sandbox, answered in
    SandboxFusion's shape (see the module's docstring for what maps to what). A language
    Tribunal does not run, files, and a failure of the sandbox are `status: SandboxError` with
    the reason; a malformed body is Tribunal's 422 and a full queue its 429, which the SDK
    retries."""
    try:
        item = to_run_item(body)
    except BadInput as exc:
        return RunCodeResponse(status=RunStatus.SANDBOX_ERROR, message=str(exc))
    try:
        details = await run_once(item, runtime)
    except SandboxError as exc:
        return RunCodeResponse(status=RunStatus.SANDBOX_ERROR, message=str(exc))
    except TribunalError as exc:
        if exc.retryable:
            raise
        return RunCodeResponse(status=RunStatus.SANDBOX_ERROR, message=str(exc))
    return to_response(details, item.language)
