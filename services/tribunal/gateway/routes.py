"""The gateway's routes: ``POST /v1/score``, ``GET /v1/specs``, OpenRLHF's ``/get_reward``."""

# No ``from __future__ import annotations``: FastAPI reads the route annotations at run time.

import asyncio
import time
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from tribunal.core.deps import AppRuntime, RuntimeDep, require_api_key
from tribunal.core.envelope import (
    ItemOutcome,
    ScoreItem,
    ScoreResponse,
    result_json,
    score_response_model,
)
from tribunal.core.errors import PayloadTooLarge, ScoringTimeout
from tribunal.core.routes.body import JSONRoute
from tribunal.core.routes.responses import ERROR_RESPONSES
from tribunal.core.scoring import InvalidItem
from tribunal.gateway.openrlhf import (
    GetRewardRequest,
    GetRewardResponse,
    check_spec,
    to_items,
    to_response,
)
from tribunal.gateway.remote import LoadShed, placing
from tribunal.gateway.schemas import GatewayDetails, GatewayScoreRequest
from tribunal.gateway.settings import GatewaySettings
from tribunal.gateway.slime import SlimeRewardRequest
from tribunal.gateway.slime import to_item as to_slime_item
from tribunal.gateway.verifier import GatewayVerifier

router = APIRouter(tags=["gateway"], dependencies=[Depends(require_api_key)], route_class=JSONRoute)

# The document's answer (results' details as the gateway writes them); answers go out as the
# JSON text score_here assembles, never validated through it.
_SCORE_RESPONSE = score_response_model("gateway", GatewayDetails)


async def score_here(runtime: AppRuntime, raw_items: list[Any]) -> str:
    """Score a batch in this process and return the ``ScoreResponse`` JSON text.

    The synchronous routes fan out from the API process itself rather than through the
    gateway's own queue: a trainer waiting on a batch saves a queue round trip (Redis,
    the gateway worker, the result write and its notification), measured in
    bench/gateway_overhead.py. Jobs (``/v1/jobs``) still go through the queue and the
    gateway worker, with their idempotency and at-least-once delivery.

    A batch that a verifier could not place (it shed load: 429) is answered 429 as a whole,
    with the verifier's longest ``Retry-After``, never with ``reward: null`` items inside a
    200: the trainer backs off and sends it again (the items that were scored are then
    answered from the verifiers' caches).

    Raises:
        PayloadTooLarge: More items than ``TRIBUNAL_MAX_BATCH_ITEMS``.
        BadInput: No item of the batch is valid.
        QueueFull: A verifier shed this batch's items (429, ``Retry-After``).
        ScoringTimeout: Not scored within ``TRIBUNAL_SYNC_TIMEOUT_S``.
    """
    service = runtime.services["gateway"]
    items = service.parse_items(raw_items)
    if len(items) > service.max_batch_items:
        raise PayloadTooLarge(
            f"items: {len(items)} items in one request; the limit is {service.max_batch_items} "
            "(TRIBUNAL_MAX_BATCH_ITEMS); split the batch or use /v1/jobs",
            field="items",
        )
    valid = [(i, item) for i, item in enumerate(items) if isinstance(item, ScoreItem)]
    if not valid:
        first = items[0]
        assert isinstance(first, InvalidItem)
        raise first.bad_input(0)
    timeout_s = runtime.settings.sync_timeout_s
    started_s = time.time()
    verifier = service.verifier
    assert isinstance(verifier, GatewayVerifier)
    shed = LoadShed()
    try:
        with placing(shed):
            results = await asyncio.wait_for(
                verifier.score_results([item for _, item in valid], service.info), timeout_s
            )
    except TimeoutError:
        raise ScoringTimeout(
            f"the batch was not scored within {timeout_s:g} s; send large batches as a job "
            "(POST /v1/jobs)"
        ) from None
    refused = shed.error()
    if refused is not None:
        raise refused
    texts: list[str] = [""] * len(items)
    for (index, _), text in zip(valid, results, strict=True):
        texts[index] = text
    for index, invalid in enumerate(items):
        if isinstance(invalid, InvalidItem):
            failed = ItemOutcome.failed(invalid.bad_input(index))
            texts[index] = result_json(invalid.item_id(index), failed, service.info)
    recorder = runtime.recorders.get("gateway")
    if recorder is not None:  # the reward inspector; its write is off this request's path
        recorder.record_request(raw_items, texts, started_s)
    return '{"results":[' + ",".join(texts) + "]}"


def _settings(request: Request) -> GatewaySettings:
    settings: GatewaySettings = request.app.state.settings
    return settings


async def _score(body: GatewayScoreRequest, runtime: AppRuntime) -> Response:
    started = time.perf_counter()
    text = await score_here(runtime, body.items)
    runtime.metrics.request_latency.labels("gateway", "score").observe(
        time.perf_counter() - started
    )
    return Response(text, media_type="application/json")


@router.post(
    "/v1/score",
    response_model=_SCORE_RESPONSE,
    operation_id="gateway_score",
    summary="Score mixed items across verifiers and reward specs",
    responses=ERROR_RESPONSES,
)
async def score(body: GatewayScoreRequest, runtime: RuntimeDep) -> Response:
    """Score every item (each on its verifier, or its spec's components on theirs) and answer
    in request order. Spec results carry ``details.sub_rewards`` and ``details.spec``."""
    return await _score(body, runtime)


@router.post(
    "/v1/gateway/score",
    response_model=_SCORE_RESPONSE,
    operation_id="gateway_score_named",
    summary="The same as POST /v1/score, at the path every service has",
    responses=ERROR_RESPONSES,
)
async def score_named(body: GatewayScoreRequest, runtime: RuntimeDep) -> Response:
    """``POST /v1/score`` at ``/v1/<service>/score``, for clients that address services
    by name."""
    return await _score(body, runtime)


@router.get("/v1/specs", operation_id="list_specs")
async def list_specs(runtime: RuntimeDep) -> dict[str, Any]:
    """The reward specs served here: name, version, hash, description and components."""
    verifier = runtime.services["gateway"].verifier
    assert isinstance(verifier, GatewayVerifier)
    return {
        "specs": [
            {
                **loaded.info(),
                "description": loaded.spec.description,
                "components": {
                    name: {"weight": c.weight, "sources": [s.kind for s in c.one_of]}
                    for name, c in loaded.spec.components.items()
                },
                "combine": loaded.spec.formula or loaded.spec.combine,
                "on_error": loaded.spec.on_error,
            }
            for loaded in verifier.specs.values()
        ]
    }


def _gateway_for(spec: str, runtime: AppRuntime) -> GatewayVerifier:
    """The gateway's verifier, once ``spec`` is known to it.

    Raises:
        BadInput: An unknown spec, naming the known ones.
    """
    verifier = runtime.services["gateway"].verifier
    assert isinstance(verifier, GatewayVerifier)
    check_spec(spec, verifier.specs)
    return verifier


async def _spec_rewards(
    items: list[dict[str, Any]], spec: str, verifier: GatewayVerifier, runtime: AppRuntime
) -> GetRewardResponse:
    """The rewards of a trainer route's items under ``spec``, in OpenRLHF's shape (the slime
    routes read theirs from it)."""
    text = await score_here(runtime, items)
    undecided_reward = verifier.specs[spec].spec.undecided_reward
    return to_response(ScoreResponse.model_validate_json(text).results, undecided_reward)


async def _get_reward(
    body: GetRewardRequest, spec: str, runtime: AppRuntime, end_tokens: tuple[str, ...]
) -> GetRewardResponse:
    verifier = _gateway_for(spec, runtime)
    return await _spec_rewards(to_items(body, spec, end_tokens), spec, verifier, runtime)


@router.post(
    "/get_reward",
    response_model=GetRewardResponse,
    operation_id="openrlhf_get_reward",
    tags=["openrlhf"],
    responses=ERROR_RESPONSES,
)
async def get_reward(
    body: GetRewardRequest, request: Request, runtime: RuntimeDep
) -> GetRewardResponse:
    """OpenRLHF ``--remote_rm_url``: rewards of the spec ``TRIBUNAL_GATEWAY_OPENRLHF_SPEC``."""
    gateway = _settings(request).gateway
    end_tokens = tuple(gateway.openrlhf_end_tokens)
    return await _get_reward(body, gateway.openrlhf_spec, runtime, end_tokens)


@router.post(
    "/get_reward/{spec}",
    response_model=GetRewardResponse,
    operation_id="openrlhf_get_reward_spec",
    tags=["openrlhf"],
    responses=ERROR_RESPONSES,
)
async def get_reward_spec(
    spec: str, body: GetRewardRequest, request: Request, runtime: RuntimeDep
) -> GetRewardResponse:
    """OpenRLHF ``--remote_rm_url http://host:8100/get_reward/<spec>``: rewards of ``spec``."""
    end_tokens = tuple(_settings(request).gateway.openrlhf_end_tokens)
    return await _get_reward(body, spec, runtime, end_tokens)


async def _slime_result(
    body: SlimeRewardRequest, spec: str, runtime: AppRuntime
) -> GetRewardResponse:
    verifier = _gateway_for(spec, runtime)
    return await _spec_rewards([to_slime_item(body, spec)], spec, verifier, runtime)


@router.post(
    "/slime/{spec}",
    response_model=float,
    operation_id="slime_reward",
    tags=["slime"],
    responses=ERROR_RESPONSES,
)
async def slime_reward(spec: str, body: SlimeRewardRequest, runtime: RuntimeDep) -> float:
    """slime ``--rm-type remote_rm --rm-url http://host:8100/slime/<spec>``: the reward of
    ``spec`` for one sample, as a bare number (what slime uses without ``--reward-key``)."""
    answer = await _slime_result(body, spec, runtime)
    return float(answer.rewards[0])


@router.post(
    "/slime/{spec}/components",
    response_model=dict[str, float],
    operation_id="slime_reward_components",
    tags=["slime"],
    responses=ERROR_RESPONSES,
)
async def slime_reward_components(
    spec: str, body: SlimeRewardRequest, runtime: RuntimeDep
) -> dict[str, float]:
    """slime with ``--reward-key reward``: ``{"reward": r, "<component>": ...}``, every
    component of ``spec`` beside the reward (slime keeps the whole mapping in the sample)."""
    answer = await _slime_result(body, spec, runtime)
    logs = {name: values[0] for name, values in answer.extra_logs.items()}
    return {"reward": float(answer.rewards[0]), **logs}
