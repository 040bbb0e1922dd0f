"""The Open Reward Standard (ORS) served from Tribunal's environments: the HTTP protocol of
the ``openreward`` SDK's environment server (read from ``openreward`` 0.1.167,
``environments/server.py`` and ``api/_session``), so that its released client runs episodes
on Tribunal's verifiers.

Routes (``{env}`` is ``math``, ``code`` or ``refiner``; a bare path such as ``/splits`` names the
environment by the ``X-Deployment`` header the SDK sends)::

    GET  /health /version /list_environments
    GET  /{env}/tools /{env}/splits       POST /{env}/tasks /num_tasks /task /task_range
    POST /create_session  (SSE: task_id, end)   POST /create /delete /ping /delete_session
    GET  /{env}/prompt /{env}/task_tools        POST /{env}/call  (SSE: task_id, end|error)

A session is named by ``X-Session-ID``; ``/create`` binds it to a task by ``split`` and
``index`` or by a ``task_spec`` this server handed out (``{"split", "index", "id"}``): the gold
answer and the tests stay here, so a client cannot send its own. A tool call is answered as
server-sent events; its result is ``{"ok": true, "output": {"blocks", "metadata", "reward",
"finished"}}``, or ``{"ok": false, "error", "reason"}`` for a malformed call (ORS's
``RunToolError``). A submission the verifier could not grade (an answer it cannot decide in
time, a bad input of its own) is a finished output like any other: its ``reward`` is the
failed reward (``tribunal.envs.environments.FAILED_REWARD``, or the refiner's spec's) and
``metadata.error`` says why (null on a graded step), so that a failure the policy may have
caused never ends the rollout. Only the infrastructure's failure (a verifier down or full) is
the stream's ``error`` event naming the envelope's class (``backend_unavailable: ...``), which
the SDK raises as ``ToolFailed``: never a reward of 0. A call that resumes an unknown
``task_id`` gets the ``error`` event ``unknown task_id`` (results are not kept for replay).

With ``TRIBUNAL_API_KEY`` set every route but ``/health`` needs the key, as ``X-API-Key`` (the
SDK's header) or ``Authorization: Bearer``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from importlib.metadata import version
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, HTTPException, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from tribunal.envs.environments import (
    ENVIRONMENTS,
    Environment,
    Episode,
    EpisodeError,
    Step,
    ToolInputError,
    Verifiers,
)
from tribunal.envs.tasks import Task
from tribunal.wire.ports import local_url

SESSION_HEADER = "X-Session-ID"
DEPLOYMENT_HEADER = "X-Deployment"


class EnvsSettings(BaseSettings):
    """The environment server's settings (``TRIBUNAL_ENVS_*``; the key is ``TRIBUNAL_API_KEY``,
    the rest of Tribunal's)."""

    model_config = SettingsConfigDict(
        env_prefix="TRIBUNAL_ENVS_", extra="forbid", populate_by_name=True
    )

    math_url: str = Field(default_factory=lambda: local_url("math"), description="Math service.")
    code_url: str = Field(default_factory=lambda: local_url("code"), description="Code service.")
    gateway_url: str = Field(
        default_factory=lambda: local_url("gateway"), description="Gateway (the refiner's spec)."
    )
    max_sessions: int = Field(default=1024, gt=0, description="Episodes held at once.")
    idle_ttl_s: float = Field(
        default=900.0,
        gt=0,
        description="An episode no request named for this long (the SDK pings every 10 s) is "
        "ended when a new one is created (ORS's own server reaps after 900 s).",
    )
    max_retries: int = Field(
        default=6, ge=0, description="Retries of a verifier call that failed in transport."
    )
    api_key: str | None = Field(
        default=None,
        validation_alias="TRIBUNAL_API_KEY",
        description="Required of every client when set (X-API-Key or bearer).",
    )


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SplitRequest(_Strict):
    """``/tasks`` and ``/num_tasks``."""

    split: str


class TaskRequest(_Strict):
    """``/task``."""

    split: str
    index: int


class TaskRangeRequest(_Strict):
    """``/task_range``: Python's ``range(start, stop)`` over the split, negatives included."""

    split: str
    start: int | None = None
    stop: int | None = None


class CreateRequest(_Strict):
    """``/create``: a task by ``split`` and ``index``, or a ``task_spec`` from this server."""

    env_name: str | None = None
    task_spec: dict[str, Any] | None = None
    split: str | None = None
    index: int | None = None
    toolset_name: str | None = None


class ToolCallRequest(_Strict):
    """``/{env}/call``: ``task_id`` is the SDK's resume token after a dropped stream."""

    name: str
    input: dict[str, Any]
    task_id: str | None = None


def sid_of(x_session_id: Annotated[str | None, Header()] = None) -> str:
    """The session id of a request (``X-Session-ID``), or a 400 naming the header."""
    if not x_session_id:
        raise HTTPException(400, f"{SESSION_HEADER} header is required")
    return x_session_id.strip()


Sid = Annotated[str, Depends(sid_of)]
"""A route's session id."""


def task_spec(split: str, index: int, task: Task) -> dict[str, Any]:
    """What a client is given of a task: where it is, its id and its public part."""
    return {"split": split, "index": index, "id": task.id, **task.public}


@dataclass
class _Held:
    env: Environment
    episode: Episode
    seen_s: float = field(default_factory=time.monotonic)
    """When a request last named the session (``time.monotonic``, seconds)."""


class OrsServer:
    """The ORS routes' state: the verifiers and the episodes held by session id.

    Args:
        settings: Where the verifiers are, the session cap, the key.
    """

    def __init__(self, settings: EnvsSettings) -> None:
        self.settings = settings
        self.verifiers = Verifiers(
            settings.math_url,
            settings.code_url,
            settings.gateway_url,
            api_key=settings.api_key,
            max_retries=settings.max_retries,
        )
        self.held: dict[str, _Held] = {}

    def environment(self, name: str | None) -> Environment:
        """The environment ``name``.

        Raises:
            HTTPException: 404 naming the environments when there is none of that name.
        """
        env = ENVIRONMENTS.get(name or "")
        if env is None:
            raise HTTPException(404, f"unknown environment {name!r}; have {sorted(ENVIRONMENTS)}")
        return env

    def resolve(self, env: Environment, split: str, index: int) -> Task:
        """Task ``index`` of ``split``, or a 400 naming the field."""
        try:
            return env.task(split, index)
        except KeyError as exc:
            raise HTTPException(400, f"split: {exc.args[0]}") from exc
        except IndexError as exc:
            raise HTTPException(400, f"index: {exc}") from exc

    def episode(self, sid: str) -> _Held:
        """The episode of session ``sid``, or a 404."""
        held = self.held.get(sid)
        if held is None:
            raise HTTPException(404, "Active environment not found")
        held.seen_s = time.monotonic()
        return held

    async def reap(self) -> int:
        """End every episode idle past ``idle_ttl_s`` (a client that went away without
        ``/delete``); return how many."""
        deadline = time.monotonic() - self.settings.idle_ttl_s
        idle = [sid for sid, held in self.held.items() if held.seen_s < deadline]
        for sid in idle:
            await self.close(sid)
        return len(idle)

    async def close(self, sid: str) -> None:
        """End session ``sid``'s episode (its interpreter session with it)."""
        held = self.held.pop(sid, None)
        if held is not None:
            await held.episode.close()


def _sse(events: list[tuple[str, str]]) -> str:
    return "".join(
        f"event: {event}\n" + "".join(f"data: {line}\n" for line in data.split("\n")) + "\n"
        for event, data in events
    )


def _stream(first: str, result: Callable[[], Awaitable[tuple[str, str]]]) -> StreamingResponse:
    """An SSE response: ``task_id`` at once, then the result's event (``end`` or ``error``)."""

    async def events() -> AsyncIterator[str]:
        yield _sse([("task_id", first)])
        yield _sse([await result()])

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(events(), media_type="text/event-stream", headers=headers)


def _output(step: Step) -> str:
    output = {
        "blocks": [{"type": "text", "text": step.text}],
        "metadata": dict(step.metadata),
        "reward": step.reward,
        "finished": step.finished,
    }
    return json.dumps({"ok": True, "output": output})


def _server(request: Request) -> OrsServer:
    server: OrsServer = request.app.state.ors
    return server


ServerDep = Annotated[OrsServer, Depends(_server)]


def _environment(request: Request, server: ServerDep) -> Environment:
    """The environment a route names: its ``{env_name}``, else the ``X-Deployment`` header (the
    SDK's bare paths, without a variant)."""
    name = request.path_params.get("env_name") or request.headers.get(DEPLOYMENT_HEADER)
    return server.environment(name)


EnvDep = Annotated[Environment, Depends(_environment)]

router = APIRouter()


@router.get("/health")
async def health() -> dict[str, str]:
    """Liveness (no key needed)."""
    return {"status": "ok"}


@router.get("/version")
async def server_version() -> dict[str, str | None]:
    """Tribunal's version."""
    return {"version": version("tribunal"), "build_sha": None}


@router.get("/list_environments")
async def list_environments() -> list[str]:
    """The environments' names."""
    return list(ENVIRONMENTS)


@router.post("/create_session")
async def create_session() -> StreamingResponse:
    """A new session id, as the SDK reads it: the SSE events ``task_id`` and ``end``."""

    async def end() -> tuple[str, str]:
        return ("end", "")

    return _stream(str(uuid.uuid4()), end)


@router.post("/delete_session")
@router.post("/delete")
async def delete(sid: Sid, server: ServerDep) -> dict[str, str]:
    """End the session's episode (closing its interpreter session)."""
    await server.close(sid)
    return {"sid": sid}


@router.post("/ping")
async def ping(sid: Sid, server: ServerDep) -> dict[str, str]:
    """The SDK's keep-alive: 404 once the episode is gone."""
    server.episode(sid)
    return {"status": "ok"}


@router.post("/create")
async def create(
    request: Request, body: CreateRequest, sid: Sid, server: ServerDep
) -> dict[str, str]:
    """Bind session ``sid`` to a task (``split`` and ``index``, or a listed ``task_spec``)."""
    if sid in server.held:
        raise HTTPException(400, "Session already exists")
    if body.toolset_name is not None:
        raise HTTPException(400, "toolset_name: no toolsets are served here")
    env = server.environment(body.env_name or request.headers.get(DEPLOYMENT_HEADER))
    if body.task_spec is not None:
        split, index = body.task_spec.get("split"), body.task_spec.get("index")
        if not isinstance(split, str) or not isinstance(index, int):
            raise HTTPException(400, "task_spec: a task this server listed ({split, index})")
        task = server.resolve(env, split, index)
        if body.task_spec != task_spec(split, index, task):
            raise HTTPException(400, "task_spec: not the task this server lists there")
    elif body.split is not None and body.index is not None:
        task = server.resolve(env, body.split, body.index)
    else:
        raise HTTPException(400, "task_spec, or split and index, is required")
    await server.reap()
    if len(server.held) >= server.settings.max_sessions:
        raise HTTPException(503, f"{server.settings.max_sessions} sessions held; retry later")
    server.held[sid] = _Held(env, Episode(env, task, server.verifiers))
    return {"sid": sid}


def _tool_list(env: Environment) -> dict[str, Any]:
    specs = [
        {"name": t.name, "description": t.description, "input_schema": dict(t.input_schema)}
        for t in env.tools
    ]
    return {"tools": specs, "supports_score_group": False}


@router.get("/{env_name}/tools")
@router.get("/tools")
async def tools(env: EnvDep) -> dict[str, Any]:
    """The environment's tools (ORS's ``ListToolsOutput``)."""
    return _tool_list(env)


@router.get("/{env_name}/splits")
@router.get("/splits")
async def splits(env: EnvDep) -> list[dict[str, str]]:
    """The environment's splits with their ORS types."""
    return [{"name": s.name, "type": s.kind} for s in env.splits.values()]


def _split_tasks(env: Environment, name: str) -> tuple[Task, ...]:
    if name not in env.splits:
        raise HTTPException(400, f"split: unknown {name!r}; splits: {sorted(env.splits)}")
    try:
        return env.splits[name].tasks()
    except FileNotFoundError as exc:
        raise HTTPException(503, str(exc)) from exc


@router.post("/{env_name}/tasks")
@router.post("/tasks")
async def tasks(env: EnvDep, body: SplitRequest) -> dict[str, Any]:
    """Every task of a split (their public specs)."""
    rows = _split_tasks(env, body.split)
    specs = [task_spec(body.split, i, task) for i, task in enumerate(rows)]
    return {"tasks": specs, "env_name": env.name}


@router.post("/{env_name}/num_tasks")
@router.post("/num_tasks")
async def num_tasks(env: EnvDep, body: SplitRequest) -> dict[str, int]:
    """How many tasks a split has."""
    return {"num_tasks": len(_split_tasks(env, body.split))}


@router.post("/{env_name}/task")
@router.post("/task")
async def task(env: EnvDep, body: TaskRequest, server: ServerDep) -> dict[str, Any]:
    """One task's public spec."""
    found = server.resolve(env, body.split, body.index)
    return {"task": task_spec(body.split, body.index, found), "env_name": env.name}


@router.post("/{env_name}/task_range")
@router.post("/task_range")
async def task_range(env: EnvDep, body: TaskRangeRequest) -> dict[str, Any]:
    """The tasks of ``range(start, stop)`` over a split."""
    rows = _split_tasks(env, body.split)
    indices = range(len(rows))[body.start : body.stop]
    return {"tasks": [task_spec(body.split, i, rows[i]) for i in indices], "env_name": env.name}


@router.get("/{env_name}/prompt")
@router.get("/prompt")
async def prompt(sid: Sid, server: ServerDep) -> list[dict[str, str]]:
    """The episode's prompt as one text block."""
    held = server.episode(sid)
    return [{"type": "text", "text": held.env.prompt(held.episode.task)}]


@router.get("/{env_name}/task_tools")
@router.get("/task_tools")
async def task_tools(sid: Sid, server: ServerDep) -> dict[str, Any]:
    """The episode's tools (its environment's)."""
    return _tool_list(server.episode(sid).env)


@router.post("/{env_name}/call")
@router.post("/call")
async def call(body: ToolCallRequest, sid: Sid, server: ServerDep) -> StreamingResponse:
    """Run one tool call of the episode; the result as SSE (see the module's docstring)."""
    held = server.episode(sid)
    if body.task_id is not None:

        async def unknown() -> tuple[str, str]:
            return ("error", "unknown task_id")

        return _stream(body.task_id, unknown)

    async def run() -> tuple[str, str]:
        try:
            step = await held.episode.call(body.name, body.input)
        except ToolInputError as exc:
            return ("end", json.dumps({"ok": False, "error": str(exc), "reason": exc.reason}))
        except EpisodeError as exc:
            retry = "retryable" if exc.retryable else "not retryable"
            return ("error", f"{exc} ({retry})")
        return ("end", _output(step))

    return _stream(str(uuid.uuid4()), run)
