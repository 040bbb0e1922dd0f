"""The gateway's routes: ``POST /v1/score``, ``GET /v1/specs``, OpenRLHF's ``/get_reward``."""

# No ``from __future__ import annotations``: FastAPI reads the route annotations at run time.

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable
from functools import partial
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from tribunal.core.deps import AppRuntime, RuntimeDep, require_api_key, require_path_key
from tribunal.core.routes.body import JSONRoute
from tribunal.core.routes.responses import ERROR_RESPONSES
from tribunal.gateway.audit import Auditor
from tribunal.gateway.budget import budget_error, spent_specs
from tribunal.gateway.openrlhf import (
    GetRewardRequest,
    GetRewardResponse,
    check_spec,
    failed_reward,
    to_items,
    to_response,
)
from tribunal.gateway.remote import LoadShed, placing
from tribunal.gateway.settings import GatewaySettings
from tribunal.gateway.slime import SlimeRewardRequest
from tribunal.gateway.slime import to_item as to_slime_item
from tribunal.gateway.verifier import GatewayVerifier
from tribunal.wire.envelope import ErrorResponse, ScoreItem, ScoreResponse, score_response_model
from tribunal.wire.errors import BadInput, QueueUnavailable, ScoringTimeout, TribunalError
from tribunal.wire.gateway import GatewayDetails, GatewayScoreRequest, ItemAudit

logger = logging.getLogger(__name__)

router = APIRouter(tags=["gateway"], dependencies=[Depends(require_api_key)], route_class=JSONRoute)
# The trainer routes again under /k/<key>/, for reward clients that send no header (OpenRLHF's
# and slime's take a bare URL): the key is in the trainer's command line and in any proxy's
# access log, so Basic credentials in the URL (http://<user>:<key>@host/..., a header) are
# preferred where the client is aiohttp.
keyed = APIRouter(
    prefix="/k/{token}", dependencies=[Depends(require_path_key)], route_class=JSONRoute
)

SCORE_RESPONSES: dict[int | str, dict[str, Any]] = {
    **ERROR_RESPONSES,
    402: {
        "model": ErrorResponse,
        "description": "A reward spec the batch names spent its budget_usd on model calls "
        "(budget_spent): `field` names the first such item's spec; nothing was scored.",
    },
}
"""The error responses of the gateway's scoring routes: every service's, and a spent budget."""

# The document's answer (results' details as the gateway writes them); answers go out as the
# JSON text score_here assembles, never validated through it.
_SCORE_RESPONSE = score_response_model("gateway", GatewayDetails)


async def score_here(
    runtime: AppRuntime,
    raw_items: list[Any],
    step: int | None = None,
    policy_version: str | None = None,
    audit: ItemAudit | None = None,
) -> str:
    """Score a batch in this process and return the ``ScoreResponse`` JSON text (``step``
    and ``policy_version``: the batch's, for its audits and hack signatures; ``audit``: the
    auditor of its ``verifier`` items that name none).

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
        BadInput: ``audit`` names a spec this gateway does not serve (``audit.spec``).
        PayloadTooLarge: More items than ``TRIBUNAL_MAX_BATCH_ITEMS``.
        BudgetSpent: A spec the batch names has spent its ``budget_usd`` (402).
        QueueFull: A verifier shed this batch's items, or this process already scores
            ``TRIBUNAL_GATEWAY_MAX_INFLIGHT_ITEMS`` items and nothing of the batch was
            started (429, ``Retry-After``; counted in ``tribunal_request_errors_total``).
        ScoringTimeout: Not scored within ``TRIBUNAL_SYNC_TIMEOUT_S``.
    """
    service = runtime.services["gateway"]
    timeout_s = runtime.settings.sync_timeout_s
    started_s = time.time()
    verifier = service.verifier
    assert isinstance(verifier, GatewayVerifier)
    if audit is not None and audit.spec not in verifier.specs:
        known = ", ".join(verifier.specs)
        raise BadInput(f"unknown spec {audit.spec!r}; known: {known}", field="audit.spec")

    async def fan_out(valid: list[ScoreItem]) -> list[str]:
        shed = LoadShed()
        try:
            with placing(shed):
                results = await asyncio.wait_for(
                    verifier.score_results(valid, service.info), timeout_s
                )
        except TimeoutError:
            raise ScoringTimeout(
                f"the batch was not scored within {timeout_s:g} s; send large batches as a job "
                "(POST /v1/jobs)"
            ) from None
        # The spec counters this batch added, for /metrics: every API process adds its own to
        # the cluster-wide stats (a queue outage costs the counts, never the answer).
        auditor_of(runtime).after(valid, results, step, policy_version=policy_version, audit=audit)
        with contextlib.suppress(QueueUnavailable):
            await runtime.queue.incr_stats("gateway", verifier.take_stats())
        refused = shed.error()
        if refused is not None:
            raise refused
        return results

    # The reward inspector keeps the results; its write is off this request's path.
    recorder = runtime.recorders.get("gateway")
    keep = (
        None
        if recorder is None
        else partial(recorder.record_request, raw_items, started_s=started_s)
    )
    await _refuse_spent(runtime, verifier, raw_items)
    with verifier.in_flight.admit(len(raw_items)):
        return await service.score_in_process(service.parse_items(raw_items), fan_out, keep)


async def _refuse_spent(runtime: AppRuntime, verifier: GatewayVerifier, raw: list[Any]) -> None:
    """Refuse the batch when a spec it names has spent its budget (tribunal.gateway.budget):
    the first such item's ``spec`` is named."""
    names = [item.get("spec") if isinstance(item, dict) else None for item in raw]
    named = (n for n in names if isinstance(n, str))
    spent = await spent_specs(runtime.queue, verifier.specs, named)
    for index, name in enumerate(names):
        if name in spent:
            budget = verifier.specs[name].spec.budget_usd
            assert budget is not None
            raise budget_error(name, spent[name], budget, f"items.{index}.spec")


def auditor_of(runtime: AppRuntime) -> Auditor:
    """The gateway's :class:`Auditor` (built on first use, beside the runtime's queue)."""
    verifier = runtime.services["gateway"].verifier
    assert isinstance(verifier, GatewayVerifier)
    if verifier.auditor is None:
        verifier.auditor = Auditor(
            verifier,
            verifier.audit_store(runtime.queue),
            timeout_s=runtime.settings.sync_timeout_s,
            stats_sink=runtime.queue.incr_stats,
        )
    return verifier.auditor


def _settings(request: Request) -> GatewaySettings:
    settings: GatewaySettings = request.app.state.settings
    return settings


async def _score(body: GatewayScoreRequest, runtime: AppRuntime) -> Response:
    started = time.perf_counter()
    text = await score_here(runtime, body.items, body.step, body.policy_version, body.audit)
    runtime.metrics.request_latency.labels("gateway", "score").observe(
        time.perf_counter() - started
    )
    return Response(text, media_type="application/json")


@router.post(
    "/v1/score",
    response_model=_SCORE_RESPONSE,
    operation_id="gateway_score",
    summary="Score mixed items across verifiers and reward specs",
    responses=SCORE_RESPONSES,
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
    responses=SCORE_RESPONSES,
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


@router.get("/v1/audits", operation_id="list_audits")
async def list_audits(runtime: RuntimeDep) -> dict[str, Any]:
    """Per audited spec: its auditor and rate, per window of trainer steps (or of time) the
    training reward, the audit reward and their gap with a 95 % normal interval on the paired
    differences, and the newest items with the largest training - audit difference."""
    verifier = runtime.services["gateway"].verifier
    assert isinstance(verifier, GatewayVerifier)
    return {"specs": await verifier.audit_report(runtime.queue)}


@router.get("/v1/signatures", operation_id="list_signatures")
async def list_signatures(runtime: RuntimeDep) -> dict[str, Any]:
    """Per spec: its hack signatures (length, repetition, duplicate, uncommitted, no_region,
    format_share, unused_tools, claim_duplicate, claim_uncited) per window of trainer steps
    (items that carry a step) or of time (items that carry none), each window's items
    counted, each signature's mean and what its items spent on model calls; and the spec's
    whole spend beside its budget."""
    verifier = runtime.services["gateway"].verifier
    assert isinstance(verifier, GatewayVerifier)
    return {"specs": await verifier.signature_report(runtime.queue)}


def _gateway_for(spec: str, runtime: AppRuntime) -> GatewayVerifier:
    """The gateway's verifier, once ``spec`` is known to it and can answer a trainer route.

    Raises:
        BadInput: An unknown spec, naming the known ones.
        ConfigurationError: The spec has no reward for a failed item (:func:`failed_reward`).
    """
    verifier = runtime.services["gateway"].verifier
    assert isinstance(verifier, GatewayVerifier)
    check_spec(spec, verifier.specs)
    failed_reward(verifier.specs[spec].spec)
    return verifier


async def _spec_rewards(
    items: list[dict[str, Any] | BadInput],
    spec: str,
    verifier: GatewayVerifier,
    runtime: AppRuntime,
    route: str,
    sample: str,
) -> GetRewardResponse:
    """The rewards of a trainer route's items under ``spec``, in OpenRLHF's shape (the slime
    routes read theirs from it); items that failed are logged (with ``sample``, the request
    described) and counted in ``tribunal_trainer_items_failed_total``."""
    valid = [item for item in items if not isinstance(item, BadInput)]
    scored = iter(
        ScoreResponse.model_validate_json(await score_here(runtime, valid)).results if valid else []
    )
    results = [item if isinstance(item, BadInput) else next(scored) for item in items]
    loaded = verifier.specs[spec]
    answer = to_response(
        results, list(loaded.spec.components), failed_reward(loaded.spec), loaded.score
    )
    for failure in answer.errors:
        runtime.metrics.trainer_items_failed.labels(route, spec, failure.code).inc()
        logger.warning(
            "%s item %d failed (%s), given the spec's failed reward %g: spec %r, %s; %s: %r",
            route,
            failure.index,
            failure.code,
            answer.rewards[failure.index],
            _excerpt(spec, 64),
            sample,
            failure.field or "-",
            failure.message,
        )
    return answer


def _excerpt(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


async def _counted(
    route: str, spec: str, runtime: AppRuntime, sample: str, answer: Awaitable[GetRewardResponse]
) -> GetRewardResponse:
    """``answer``, or its error logged (route, spec, which sample, why) and counted in
    ``tribunal_trainer_samples_refused_total`` before it is raised: a trainer shows little of
    it (OpenRLHF logs at INFO and trains on with a reward of None)."""
    try:
        return await answer
    except TribunalError as exc:
        verifier = runtime.services["gateway"].verifier
        assert isinstance(verifier, GatewayVerifier)
        # A name not served is not a label value: the metric's size stays bounded.
        known = spec if spec in verifier.specs else "unknown"
        runtime.metrics.trainer_refusals.labels(route, known, exc.code).inc()
        # Excerpts, and repr() of anything a request sets: one line per refusal, whatever
        # newlines the prompt, the label or the spec's name carry.
        logger.warning(
            "%s sample refused (%s, HTTP %d): spec %r, %s; %s: %r",
            route,
            exc.code,
            exc.http_status,
            _excerpt(spec, 64),
            sample,
            exc.field or "-",
            exc.message,
        )
        raise


TRUNCATION_LOG_WINDOW_S = 60.0
"""A spec's truncated prompts are logged once per this many seconds (and all counted)."""


def _note_truncation(
    spec: str, truncated: int, total: int, verifier: GatewayVerifier, runtime: AppRuntime
) -> None:
    """Count OpenRLHF's truncated prompts, and log them once per spec and window."""
    runtime.metrics.trainer_prompts_truncated.labels("openrlhf", spec).inc(truncated)
    now = time.monotonic()
    last = verifier.truncation_logged.get(spec)
    if last is not None and now - last < TRUNCATION_LOG_WINDOW_S:
        return
    verifier.truncation_logged[spec] = now
    logger.warning(
        "openrlhf: %d of %d queries for spec %r start inside their prompt (OpenRLHF kept the "
        "last tokens of a prompt longer than max_len - max_new_tokens); scored from the part "
        "kept. Counted in tribunal_trainer_prompts_truncated_total; logged once per spec every "
        "%g s",
        truncated,
        total,
        _excerpt(spec, 64),
        TRUNCATION_LOG_WINDOW_S,
    )


async def _get_reward(
    body: GetRewardRequest, spec: str, runtime: AppRuntime, end_tokens: tuple[str, ...]
) -> GetRewardResponse:
    prompt = body.prompts[0] if body.prompts else body.query[0]
    label = body.labels[0] if body.labels else None
    sample = f"prompt {_excerpt(prompt)!r}, label {_excerpt(label)!r} ({len(body.query)} queries)"

    async def answer() -> GetRewardResponse:
        verifier = _gateway_for(spec, runtime)
        truncated: list[int] = []
        items = to_items(body, spec, end_tokens, truncated)
        if truncated:
            _note_truncation(spec, len(truncated), len(body.query), verifier, runtime)
        return await _spec_rewards(items, spec, verifier, runtime, "openrlhf", sample)

    return await _counted("openrlhf", spec, runtime, sample, answer())


@router.post(
    "/get_reward",
    response_model=GetRewardResponse,
    operation_id="openrlhf_get_reward",
    tags=["openrlhf"],
    responses=SCORE_RESPONSES,
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
    responses=SCORE_RESPONSES,
)
async def get_reward_spec(
    spec: str, body: GetRewardRequest, request: Request, runtime: RuntimeDep
) -> GetRewardResponse:
    """OpenRLHF ``--remote_rm_url http://host:8100/get_reward/<spec>``: rewards of ``spec``."""
    end_tokens = tuple(_settings(request).gateway.openrlhf_end_tokens)
    return await _get_reward(body, spec, runtime, end_tokens)


def _item_error_header(answer: GetRewardResponse) -> dict[str, str]:
    """``Tribunal-Item-Error: <code>; field=<field>`` for a failed slime sample (printable
    ASCII only: a header cannot carry the rest)."""
    if not answer.errors:
        return {}
    failure = answer.errors[0]
    value = failure.code + (f"; field={failure.field}" if failure.field else "")
    return {"Tribunal-Item-Error": "".join(c for c in value if " " <= c <= "~")}


async def _slime_result(
    body: SlimeRewardRequest, spec: str, runtime: AppRuntime, response: Response
) -> GetRewardResponse:
    sample = f"prompt {_excerpt(body.prompt)!r}, label {_excerpt(body.label)!r}"

    async def answer() -> GetRewardResponse:
        verifier = _gateway_for(spec, runtime)
        item = to_slime_item(body, spec)
        return await _spec_rewards([item], spec, verifier, runtime, "slime", sample)

    result = await _counted("slime", spec, runtime, sample, answer())
    response.headers.update(_item_error_header(result))
    return result


@router.post(
    "/slime/{spec}",
    response_model=float,
    operation_id="slime_reward",
    tags=["slime"],
    responses=SCORE_RESPONSES,
)
async def slime_reward(
    spec: str, body: SlimeRewardRequest, runtime: RuntimeDep, response: Response
) -> float:
    """slime ``--rm-type remote_rm --rm-url http://host:8100/slime/<spec>``: the reward of
    ``spec`` for one sample, as a bare number (what slime uses without ``--reward-key``); a
    sample that failed gets the spec's failed reward and a ``Tribunal-Item-Error`` header."""
    answer = await _slime_result(body, spec, runtime, response)
    return float(answer.rewards[0])


@router.post(
    "/slime/{spec}/components",
    response_model=dict[str, float],
    operation_id="slime_reward_components",
    tags=["slime"],
    responses=SCORE_RESPONSES,
)
async def slime_reward_components(
    spec: str, body: SlimeRewardRequest, runtime: RuntimeDep, response: Response
) -> dict[str, float]:
    """slime with ``--reward-key reward``: ``{"reward": r, "<component>": ..., "undecided",
    "failed"}``, every component of ``spec`` beside the reward (slime keeps the whole mapping
    in the sample); a sample that failed also gets a ``Tribunal-Item-Error`` header."""
    answer = await _slime_result(body, spec, runtime, response)
    logs = {name: values[0] for name, values in answer.extra_logs.items()}
    return {"reward": float(answer.rewards[0]), **logs}


@keyed.post(
    "/get_reward/{spec}",
    response_model=GetRewardResponse,
    operation_id="openrlhf_get_reward_keyed",
    tags=["openrlhf"],
    responses=SCORE_RESPONSES,
)
async def get_reward_keyed(
    spec: str, body: GetRewardRequest, request: Request, runtime: RuntimeDep
) -> GetRewardResponse:
    """``POST /get_reward/<spec>`` with ``TRIBUNAL_API_KEY`` as the path's ``token``."""
    return await get_reward_spec(spec, body, request, runtime)


@keyed.post(
    "/slime/{spec}",
    response_model=float,
    operation_id="slime_reward_keyed",
    tags=["slime"],
    responses=SCORE_RESPONSES,
)
async def slime_reward_keyed(
    spec: str, body: SlimeRewardRequest, runtime: RuntimeDep, response: Response
) -> float:
    """``POST /slime/<spec>`` with ``TRIBUNAL_API_KEY`` as the path's ``token``."""
    return await slime_reward(spec, body, runtime, response)


@keyed.post(
    "/slime/{spec}/components",
    response_model=dict[str, float],
    operation_id="slime_reward_components_keyed",
    tags=["slime"],
    responses=SCORE_RESPONSES,
)
async def slime_reward_components_keyed(
    spec: str, body: SlimeRewardRequest, runtime: RuntimeDep, response: Response
) -> dict[str, float]:
    """``POST /slime/<spec>/components`` with ``TRIBUNAL_API_KEY`` as the path's ``token``."""
    return await slime_reward_components(spec, body, runtime, response)
