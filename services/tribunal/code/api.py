"""The code service on port 8102: ``POST /v1/code/score``, ``POST /v1/code/run`` and
SandboxFusion's ``POST /run_code`` (:mod:`tribunal.code.sandbox_fusion`)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, FastAPI
from pydantic import Field

from tribunal.code import mcp_server, sandbox_fusion, sandbox_fusion_jupyter, session_api
from tribunal.code.runs import run_once
from tribunal.code.session_verifier import CodeSessionVerifier
from tribunal.code.settings import CodeSettings
from tribunal.code.verifier import CodeRunVerifier, CodeVerifier
from tribunal.core.app import create_app as create_core_app
from tribunal.core.deps import RuntimeDep, require_api_key
from tribunal.core.routes.body import JSONRoute
from tribunal.core.routes.responses import ERROR_RESPONSES
from tribunal.core.service import ServiceSpec
from tribunal.core.verifier import Verifier
from tribunal.wire.code import RunDetails, RunItem
from tribunal.wire.ports import PORTS


class RunRequest(RunItem):
    """``POST /v1/code/run``: one program, its stdin and limits (``id`` is optional)."""

    id: str = Field(default="run", min_length=1, max_length=512)


router = APIRouter(
    prefix="/v1/code", tags=["code"], dependencies=[Depends(require_api_key)], route_class=JSONRoute
)


@router.post("/run", response_model=RunDetails, operation_id="code_run", responses=ERROR_RESPONSES)
async def run(body: RunRequest, runtime: RuntimeDep) -> RunDetails:
    """Run a program once in the sandbox (the code-interpreter tool of agentic rollouts) and
    return its stdout, stderr (each capped, with a flag), exit code, verdict and time.

    A tool endpoint, outside the scoring envelope on purpose: a tool call wants what the
    program printed, not a reward, so the body is one program and the answer is the run
    itself (`RunDetails`), flat, as a code-interpreter tool expects; there is no reward, no
    cache (running again may be the point) and no batch. Failures are the API's error body
    (`sandbox_error` 500, `bad_input` 422, `queue_full` 429...). It goes through the queue
    like every scoring request (verifier `code_run`), so concurrency stays bounded by the
    workers' sandbox slots; batches of runs can go through `POST /v1/jobs` with
    `"verifier": "code_run"`, whose results are envelopes with `reward: null` and the run
    in `details`."""
    return await run_once(body, runtime)


def create_verifiers(settings: CodeSettings) -> list[Verifier]:
    """The code service serves scoring against tests and single runs, and (unless
    ``TRIBUNAL_CODE_MAX_SESSIONS=0``) code-interpreter sessions."""
    config = settings.code.config()
    verifiers: list[Verifier] = [CodeVerifier(config), CodeRunVerifier(config)]
    if settings.code.max_sessions > 0:
        verifiers.append(CodeSessionVerifier(config, settings.code.session_limits()))
    return verifiers


def startup_hint(settings: CodeSettings) -> str | None:
    """One line when code would not be sandboxed. (When it cannot be, the verifier's own
    refusal says why, once: see ``CodeVerifier.start``.)"""
    if settings.code.isolation == "none":
        return "TRIBUNAL_CODE_ISOLATION=none: programs run UNSANDBOXED (local development only)"
    return None


SERVICE = ServiceSpec(
    name="code",
    port=PORTS["code"],
    settings_cls=CodeSettings,
    create_verifiers=create_verifiers,
    routers=lambda: [
        router,
        session_api.router,
        sandbox_fusion.router,
        sandbox_fusion_jupyter.router,
    ],
    score_routes=("code",),
    startup_hint=startup_hint,
    mount=mcp_server.mount,
)


def create_app(settings: CodeSettings | None = None) -> FastAPI:
    """Build the code service's app (settings from the environment when omitted)."""
    return create_core_app(SERVICE, settings)
