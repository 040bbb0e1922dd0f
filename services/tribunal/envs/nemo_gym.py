"""NeMo Gym's resources-server protocol for Tribunal's verifiers, under ``/nemo_gym/{server}``
(``math``, ``code``), as ``nemo-gym`` 0.4.0 defines it (``nemo_gym/base_resources_server.py``:
``/seed_session``, ``/verify``, ``/aggregate_metrics``), plus ``GET /reverify_mode``, which
declares whether a stored rollout may be verified again, as newer NeMo Gym defines it
(``nemo_gym/base_resources_server.py`` at commit 07d6b0d0, August 2026: ``ReverifyMode``, read by
``gym eval reverify`` in ``nemo_gym/rollout_reverification.py``).

``/verify`` takes NeMo Gym's ``BaseVerifyRequest`` (``responses_create_params`` and the policy's
``response``, an OpenAI Responses object) with the task's own fields from its data row, as NeMo
Gym's servers take them: ``expected_answer`` for ``math`` (as ``math_with_judge`` does), and
``verifier_metadata.tests`` (the code verifier's tests) for ``code``. Graded is the text of the
response's ``output_text`` parts, joined, as ``math_with_judge`` reads it: the reasoning items
and tool calls of the response are not. It answers the request back with ``reward`` and
Tribunal's ``tribunal`` result (details, verifier version), NeMo Gym's ``BaseVerifyResponse``.

A sample that cannot be graded is answered 200, as NeMo Gym's own shape: ``reward`` is the
failed reward (``tribunal.envs.environments.FAILED_REWARD``, 0.0: the verifiers' lowest, so
that no failure is paid more than an answer) and ``tribunal.error`` says why (``code``,
``message``, ``retryable``, ``field``; null for a graded sample). NeMo Gym's agents raise on
any error status (``raise_for_status``) and its rollout collection then stops, so a sample's
own failure must not be one: a row without its ``expected_answer`` or ``verifier_metadata.tests``
(``bad_input`` naming the field), an answer the verifier cannot decide in time (``timeout``),
a task the verifier refuses (an unparseable ``expected_answer``). ``BaseVerifyResponse``
reads ``reward`` and ignores ``tribunal`` (pydantic's default); an agent's response model that
allows extra fields keeps it in the rollout, and rollout collection sends it on to
``/aggregate_metrics``, which counts such samples (``failed``). Only the infrastructure's
failure (a verifier down or full: no sample causes it, a retry may cure it) is still an error
status: 502 naming the envelope's error class, never a reward of 0. A request NeMo Gym's
models would refuse (no ``response`` or ``responses_create_params``) is 422, FastAPI's.
``/reverify_mode`` answers NeMo Gym's ``ReverifyMode`` as a bare JSON
string (``gym eval reverify`` reads it as ``ReverifyMode(response_json)``): ``"stateless"`` for
a verifier that ``tribunal rescore`` declares stateless (:data:`tribunal.gateway.rescore.REVERIFY`:
the same inputs under the same version get the same reward, and the result names its version
and configuration hash), ``"unsupported"`` for one declared stateful, ``"unknown"`` for one not
declared; ``gym eval reverify`` refuses the last two without ``--force``.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field

from tribunal.envs.environments import FAILED_REWARD, EpisodeError
from tribunal.envs.ors import OrsServer
from tribunal.gateway.rescore import REVERIFY
from tribunal.wire.envelope import ItemError
from tribunal.wire.errors import BadInput

router = APIRouter(prefix="/nemo_gym")

TASK_INDEX_KEY = "_ng_task_index"
"""NeMo Gym's key of a verify response's task (``nemo_gym.global_config.TASK_INDEX_KEY_NAME``)."""

SERVERS = ("math", "code")


class VerifyRequest(BaseModel):
    """NeMo Gym's ``BaseVerifyRequest`` with the task's fields (kept as sent)."""

    model_config = ConfigDict(extra="allow")

    responses_create_params: dict[str, Any]
    response: dict[str, Any]
    expected_answer: str | None = None
    verifier_metadata: dict[str, Any] | None = None


class AggregateRequest(BaseModel):
    """``/aggregate_metrics``: the verify responses (each with ``reward`` and its task index)."""

    verify_responses: list[dict[str, Any]]


class AggregateMetrics(BaseModel):
    """NeMo Gym's ``AggregateMetrics`` shape: per task, over all, and the headline ones."""

    group_level_metrics: list[dict[str, Any]] = Field(default_factory=list)
    agent_metrics: dict[str, Any] = Field(default_factory=dict)
    key_metrics: dict[str, Any] = Field(default_factory=dict)


def output_text(response: dict[str, Any]) -> str:
    """The ``output_text`` parts of a Responses object's ``message`` items, joined."""
    parts = []
    for item in response.get("output") or []:
        if isinstance(item, dict) and item.get("type") == "message":
            for content in item.get("content") or []:
                if isinstance(content, dict) and content.get("type") == "output_text":
                    parts.append(str(content.get("text", "")))
    return "".join(parts)


def _server(request: Request, name: str) -> OrsServer:
    if name not in SERVERS:
        raise HTTPException(404, f"unknown resources server {name!r}; have {list(SERVERS)}")
    server: OrsServer = request.app.state.ors
    return server


def _item(name: str, body: VerifyRequest, text: str) -> dict[str, Any]:
    """The verifier's item for the sample.

    Raises:
        BadInput: The task's row lacks what the server grades against (naming the field).
    """
    if name == "math":
        if body.expected_answer is None:
            raise BadInput("expected_answer: required by the math server", field="expected_answer")
        return {"id": "verify", "response": text, "ground_truth": body.expected_answer}
    tests = (body.verifier_metadata or {}).get("tests")
    if not isinstance(tests, dict):
        raise BadInput(
            "verifier_metadata.tests: required by the code server", field="verifier_metadata.tests"
        )
    return {"id": "verify", "language": "python", "response": text, "tests": tests}


@router.post("/{name}/seed_session")
async def seed_session(request: Request, name: str) -> dict[str, Any]:
    """Nothing to seed: the verifiers keep no per-rollout state."""
    _server(request, name)
    return {}


@router.post("/{name}/verify")
async def verify(request: Request, name: str, body: VerifyRequest) -> dict[str, Any]:
    """The request back with the verifier's ``reward`` (and its result under ``tribunal``)."""
    server = _server(request, name)
    try:
        item = _item(name, body, output_text(body.response))
    except BadInput as exc:
        error = ItemError.from_exception(exc).model_dump()
        tribunal = {"details": {}, "verifier": None, "error": error}
        return {**body.model_dump(), "reward": FAILED_REWARD, "tribunal": tribunal}
    try:
        step = await server.verifiers.score(name, item)
    except EpisodeError as exc:
        raise HTTPException(502, f"{exc} (retryable: {exc.retryable})") from exc
    return {**body.model_dump(), "reward": step.reward, "tribunal": dict(step.metadata)}


def reverify_mode(verifier: str) -> str:
    """NeMo Gym's ``ReverifyMode`` of ``verifier`` from its declaration for ``tribunal rescore``
    (``REVERIFY``): ``stateless``; ``unsupported`` when stateful; ``unknown`` when undeclared."""
    declared = REVERIFY.get(verifier)
    if declared is None:
        return "unknown"
    return "stateless" if declared == "stateless" else "unsupported"


@router.get("/{name}/reverify_mode")
async def get_reverify_mode(request: Request, name: str) -> str:
    """Whether stored rollouts may be verified again: NeMo Gym's ``ReverifyMode`` as a bare
    JSON string (see the module)."""
    _server(request, name)
    return reverify_mode(name)


@router.post("/{name}/aggregate_metrics")
async def aggregate_metrics(
    request: Request, name: str, body: AggregateRequest
) -> AggregateMetrics:
    """Mean, min, max and standard deviation of the reward per task and over all responses,
    the share of tasks with at least one reward of 1 (``pass@k``, k = rollouts a task), and
    ``failed``: the responses that could not be graded (``tribunal.error`` set; their failed
    reward is in the statistics, as it was paid)."""
    _server(request, name)
    if not body.verify_responses:
        return AggregateMetrics()
    by_task: dict[int, list[float]] = defaultdict(list)
    for index, response in enumerate(body.verify_responses):
        reward = response.get("reward")
        if not isinstance(reward, int | float):
            raise HTTPException(422, f"verify_responses[{index}].reward: a number is required")
        by_task[int(response.get(TASK_INDEX_KEY, 0))].append(float(reward))
    groups = [
        {TASK_INDEX_KEY: task, **_stats(rewards)} for task, rewards in sorted(by_task.items())
    ]
    everything = [reward for rewards in by_task.values() for reward in rewards]
    solved = sum(1 for rewards in by_task.values() if max(rewards) >= 1.0) / len(by_task)
    failed = sum(1 for response in body.verify_responses if _failed(response))
    agent = {**_stats(everything), "pass@k": solved, "failed": failed}
    key = {"mean/reward": agent["mean/reward"], "pass@k": solved, "failed": failed}
    return AggregateMetrics(group_level_metrics=groups, agent_metrics=agent, key_metrics=key)


def _failed(response: dict[str, Any]) -> bool:
    """Whether a verify response is one this server could not grade (``tribunal.error``)."""
    tribunal = response.get("tribunal")
    return isinstance(tribunal, dict) and tribunal.get("error") is not None


def _stats(rewards: list[float]) -> dict[str, float]:
    return {
        "mean/reward": statistics.fmean(rewards),
        "min/reward": min(rewards),
        "max/reward": max(rewards),
        "std/reward": statistics.pstdev(rewards),
    }
