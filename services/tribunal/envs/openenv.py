"""OpenEnv's environment protocol served from Tribunal's environments: ``reset`` / ``step`` /
``state`` over a WebSocket (``/openenv/{env}/ws``, the episode's state kept for the
connection) and over HTTP (``POST /openenv/{env}/reset``, ``POST /openenv/{env}/step``,
``GET /openenv/{env}/state``), as ``openenv-core`` 0.3.0 speaks it (read from its
``core/env_client.py`` and ``core/env_server/http_server.py``).

An action names a tool of the environment and its arguments: ``{"tool": "python", "arguments":
{"code": "..."}}``, ``{"tool": "submit", "arguments": {"answer": "18"}}``. ``reset`` takes
``split`` and ``index`` (default: the first split; ``seed`` picks an index when ``index`` is
not given) and answers the prompt, the tools and the task's public spec. A step answers
``{"observation": {"text", "metadata"}, "reward", "done"}``; ``reward`` is the verifier's on
``submit`` and null on a tool step.

A per-step (trajectory) reward, as OpenEnv's RFC 004 trajectory rubrics give it
(``ExponentialDiscountingTrajectoryRubric`` of ``openenv-core`` 0.3.0,
``core/rubrics/trajectory.py``): ``reset`` with ``{"trajectory": {"gamma": g,
"intermediate_reward": c}}`` (defaults 0.99 and 0.0, OpenEnv's) makes every tool step's reward
``c`` (the rubric's ``forward`` before ``done``) and the last step's the verifier's ``R`` (its
``score_trajectory``); that step's ``metadata.step_rewards`` (and ``state``'s, once done) is the
credit of each of the episode's ``T`` steps, ``R * g ** (T - 1 - t)`` for step ``t`` (its
``compute_step_rewards``). A step is an observation: a tool call, a submission, and a
submission whose content was refused (below) are steps of the trajectory; an error message is
not.

With ``TRIBUNAL_API_KEY`` set, the key goes in a header (``X-API-Key`` or ``Authorization:
Bearer``) or, since ``openenv-core``'s client sends no headers, in the path: the same routes are
served under ``/k/<key>/openenv/...``.

A submission the verifier could not grade (an answer it cannot decide in time, a bad input of
its own) is an observation like any other, ``done``: its ``reward`` is the failed reward
(``tribunal.envs.environments.FAILED_REWARD``, or the refiner's spec's) and
``observation.metadata.error`` says why (null on a graded step); over HTTP too, 200.

Text the policy wrote that the environment refuses (an argument's content, not its shape: a
math answer over several lines, an argument longer than the services take:
:class:`tribunal.envs.environments.ContentRefused`) is an observation too, **not** ``done``:
the agent may try again, as on ORS, whose ``ok: false`` reply keeps the episode going. Its
``reward`` is null, OpenEnv's value of a step nothing graded (``Observation.reward``'s default,
as a tool step's; with a per-step reward, the intermediate reward, as OpenEnv's rubric gives
every step before ``done``): 0 would read as a graded wrong answer. Its
``observation.metadata.error`` is ``{"code", "message", "retryable", "field"}``, ``code``
ORS's ``reason`` (``input_validation``), ``message`` ORS's ``error`` (``answer: one line, the
final answer``) and ``retryable`` false, as an item error's (the same text is refused again; a
different one is the agent's next try); over HTTP too, 200.

Errors are OpenEnv's error message ``{"type": "error", "data": {"message", "code"}}``: a
malformed action (an unknown tool, a missing or mistyped argument, a call after ``submit``: the
action's shape, which OpenEnv's own server refuses the same way) is ``VALIDATION_ERROR``;
the infrastructure's failure (a verifier down or full) is ``EXECUTION_ERROR`` with the
envelope's error class leading the message (``backend_unavailable: ...``), never a reward of 0
(the ``openenv-core`` client raises it as ``RuntimeError``). Over HTTP they are 422 and 502.

HTTP keeps no state between requests, as OpenEnv's own HTTP routes (a fresh environment per
request): ``/step`` takes the task with the action (``{"action": {..., "split", "index"}}``)
and runs it in an episode of its own, closed after it; episodes of several steps use the
WebSocket.
"""

from __future__ import annotations

import json
import random
import uuid
from typing import Any

from fastapi import APIRouter, HTTPException, Request, WebSocket, WebSocketDisconnect
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tribunal.core.middleware import key_matches, presented_key
from tribunal.envs.environments import (
    ContentRefused,
    Environment,
    Episode,
    EpisodeError,
    Step,
    ToolInputError,
)
from tribunal.envs.ors import OrsServer, task_spec

router = APIRouter(prefix="/openenv")


class Trajectory(BaseModel):
    """A per-step reward for the episode, as OpenEnv's ``ExponentialDiscountingTrajectoryRubric``
    (see the module): ``gamma`` discounts the final reward back over the steps,
    ``intermediate_reward`` is each non-final step's reward."""

    model_config = ConfigDict(extra="forbid")

    gamma: float = Field(default=0.99, ge=0.0, le=1.0)
    intermediate_reward: float = Field(default=0.0, allow_inf_nan=False)


class ResetData(BaseModel):
    """``reset``'s data: which task (OpenEnv's ``seed`` and ``episode_id`` are kept), and the
    per-step reward option."""

    model_config = ConfigDict(extra="forbid")

    split: str | None = None
    index: int | None = None
    seed: int | None = None
    episode_id: str | None = None
    trajectory: Trajectory | None = None


class Action(BaseModel):
    """A step's action: a tool and its arguments; over HTTP, the task too."""

    model_config = ConfigDict(extra="forbid")

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    split: str | None = None
    index: int | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class HttpStep(BaseModel):
    """``POST /openenv/{env}/step``: OpenEnv's ``StepRequest``."""

    action: Action
    timeout_s: float | None = None
    request_id: str | None = None


class _OpenEnvEpisode:
    """One connection's episode: the task, the tool state, the step count."""

    def __init__(self, server: OrsServer, env: Environment) -> None:
        self.server = server
        self.env = env
        self.episode: Episode | None = None
        self.episode_id: str | None = None
        self.split: str | None = None
        self.index: int | None = None
        self.step_count = 0
        self.trajectory: Trajectory | None = None
        self.step_rewards: list[float] | None = None

    async def reset(self, data: ResetData) -> dict[str, Any]:
        await self.close()
        split = data.split or next(iter(self.env.splits))
        index = data.index
        if index is None:
            size = len(self.env.splits[split].tasks()) if split in self.env.splits else 1
            index = random.Random(data.seed).randrange(size)
        task = self.server.resolve(self.env, split, index)
        self.episode = Episode(self.env, task, self.server.verifiers)
        self.episode_id = data.episode_id or str(uuid.uuid4())
        self.split, self.index, self.step_count = split, index, 0
        self.trajectory, self.step_rewards = data.trajectory, None
        observation = {
            "prompt": self.env.prompt(task),
            "tools": [tool.name for tool in self.env.tools],
            "task": task_spec(split, index, task),
        }
        return {"observation": observation, "reward": None, "done": False}

    async def step(self, action: Action) -> dict[str, Any]:
        if self.episode is None:
            raise ToolInputError("input_validation", "reset first: no episode yet")
        try:
            step: Step = await self.episode.call(action.tool, action.arguments)
        except ContentRefused as exc:
            step = refused(exc)
        self.step_count += 1
        metadata: dict[str, Any] = dict(step.metadata)
        reward = step.reward
        if self.trajectory is not None:
            if not step.finished:
                reward = self.trajectory.intermediate_reward
            elif reward is not None:
                self.step_rewards = discounted(reward, self.step_count, self.trajectory.gamma)
                metadata["step_rewards"] = self.step_rewards
        observation = {"text": step.text, "metadata": metadata}
        return {"observation": observation, "reward": reward, "done": step.finished}

    def state(self) -> dict[str, Any]:
        return {
            "episode_id": self.episode_id,
            "step_count": self.step_count,
            "split": self.split,
            "index": self.index,
            "done": self.episode is not None and self.episode.finished,
            "step_rewards": self.step_rewards,
        }

    async def close(self) -> None:
        if self.episode is not None:
            await self.episode.close()


def refused(exc: ContentRefused) -> Step:
    """The observation of a tool call whose argument's content was refused: not finished,
    no reward, ``metadata.error`` as an item error (``code`` ORS's ``reason``)."""
    error = {"code": exc.reason, "message": str(exc), "retryable": False, "field": exc.field}
    text = f"Refused ({exc.reason}: {exc}). The episode goes on; call the tool again."
    return Step(text, None, False, {"error": error})


def discounted(final: float, steps: int, gamma: float) -> list[float]:
    """Each of ``steps`` steps' credit for the episode's final reward ``final``:
    ``final * gamma ** (steps - 1 - t)`` for step ``t`` (the last step gets ``final``), as
    ``openenv-core`` 0.3.0's ``ExponentialDiscountingTrajectoryRubric.compute_step_rewards``."""
    return [final * gamma ** (steps - 1 - t) for t in range(steps)]


def _server(scope: Request | WebSocket) -> OrsServer:
    server: OrsServer = scope.app.state.ors
    return server


def _error(code: str, message: str) -> str:
    return json.dumps({"type": "error", "data": {"message": message, "code": code}})


@router.websocket("/{env_name}/ws")
async def websocket_episode(websocket: WebSocket, env_name: str) -> None:
    """One episode per connection: ``reset``, ``step``, ``state``, ``close`` messages."""
    server = _server(websocket)
    expected = server.settings.api_key
    if expected is not None and not _key_ok(websocket, expected):
        await websocket.close(code=1008, reason="X-API-Key (TRIBUNAL_API_KEY) required")
        return
    await websocket.accept()
    try:
        env = server.environment(env_name)
    except HTTPException as exc:
        await websocket.send_text(_error("SESSION_ERROR", str(exc.detail)))
        await websocket.close()
        return
    episode = _OpenEnvEpisode(server, env)
    try:
        while True:
            reply = await _answer(episode, await websocket.receive_text())
            if reply is None:
                break
            await websocket.send_text(reply)
    except WebSocketDisconnect:
        pass
    finally:
        await episode.close()
    await websocket.close()


async def _answer(episode: _OpenEnvEpisode, raw: str) -> str | None:
    """The reply to one message (None: the client closed the episode)."""
    try:
        message = json.loads(raw)
    except json.JSONDecodeError as exc:
        return _error("INVALID_JSON", f"Invalid JSON: {exc}")
    kind = message.get("type") if isinstance(message, dict) else None
    try:
        if kind == "reset":
            data = await episode.reset(ResetData.model_validate(message.get("data") or {}))
            return json.dumps({"type": "observation", "data": data})
        if kind == "step":
            data = await episode.step(Action.model_validate(message.get("data")))
            return json.dumps({"type": "observation", "data": data})
        if kind == "state":
            return json.dumps({"type": "state", "data": episode.state()})
        if kind == "close":
            return None
    except ValidationError as exc:
        return _error("VALIDATION_ERROR", str(exc))
    except HTTPException as exc:
        return _error("VALIDATION_ERROR", str(exc.detail))
    except ToolInputError as exc:
        return _error("VALIDATION_ERROR", f"{exc.reason}: {exc}")
    except EpisodeError as exc:
        retry = "retryable" if exc.retryable else "not retryable"
        return _error("EXECUTION_ERROR", f"{exc} ({retry})")
    return _error("UNKNOWN_TYPE", f"unknown message type {kind!r}")


def _key_ok(websocket: WebSocket, expected: str) -> bool:
    """The key of a WebSocket: in its path (``/k/<key>/openenv/...``: ``openenv-core``'s client
    sends no headers) or its headers."""
    headers = websocket.headers
    given = websocket.path_params.get("key") or headers.get("x-api-key")
    return key_matches(given or presented_key(headers.get("authorization", "")), expected)


@router.post("/{env_name}/reset")
async def http_reset(
    request: Request, env_name: str, body: ResetData | None = None
) -> dict[str, Any]:
    """A new episode's first observation (no state is kept: see the module's docstring)."""
    server = _server(request)
    episode = _OpenEnvEpisode(server, server.environment(env_name))
    return await episode.reset(body or ResetData())


@router.post("/{env_name}/step")
async def http_step(request: Request, env_name: str, body: HttpStep) -> dict[str, Any]:
    """One action in an episode of its own on the task the action names."""
    server = _server(request)
    action = body.action
    if action.split is None or action.index is None:
        raise HTTPException(422, "action.split and action.index: the task of this step")
    episode = _OpenEnvEpisode(server, server.environment(env_name))
    await episode.reset(ResetData(split=action.split, index=action.index))
    try:
        return await episode.step(action)
    except ToolInputError as exc:
        raise HTTPException(422, f"action: {exc.reason}: {exc}") from exc
    except EpisodeError as exc:
        raise HTTPException(502, f"{exc} (retryable: {exc.retryable})") from exc
    finally:
        await episode.close()


@router.get("/{env_name}/state")
async def http_state(request: Request, env_name: str) -> dict[str, Any]:
    """An environment's state between episodes over HTTP: none kept (step count 0)."""
    _server(request).environment(env_name)
    return {"episode_id": None, "step_count": 0}


@router.get("/{env_name}/health")
async def http_health(request: Request, env_name: str) -> dict[str, str]:
    """OpenEnv's health answer for one environment."""
    _server(request).environment(env_name)
    return {"status": "healthy"}
