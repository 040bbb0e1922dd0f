"""``POST /v1/<verifier>/score``: enqueue a batch, wait, answer in request order."""

# No ``from __future__ import annotations`` here: FastAPI must see the request model built
# at run time for each verifier as a real annotation, not a string.

import time
from typing import Annotated

from fastapi import APIRouter, Depends, Header
from fastapi.responses import Response
from pydantic import BaseModel

from tribunal.core.deps import RuntimeDep, require_api_key
from tribunal.core.routes.body import JSONRoute
from tribunal.core.routes.responses import ERROR_RESPONSES
from tribunal.core.scoring import (
    CACHE_CONTROL_DESCRIPTION,
    IDEMPOTENCY_KEY_DESCRIPTION,
    wants_cache,
)
from tribunal.wire.envelope import ScoreResponse


def score_router(
    verifier_name: str,
    request_model: type[BaseModel],
    response_model: type[ScoreResponse] = ScoreResponse,
) -> APIRouter:
    """Build the synchronous scoring route of one verifier.

    ``response_model`` documents the answer (``scoring.score_response_type``); the route
    answers the JSON text the workers wrote, which FastAPI passes on without validating it.
    """
    router = APIRouter(
        prefix=f"/v1/{verifier_name}",
        tags=[verifier_name],
        dependencies=[Depends(require_api_key)],
        route_class=JSONRoute,
    )

    @router.post(
        "/score",
        response_model=response_model,
        operation_id=f"{verifier_name}_score",
        summary=f"Score a batch with the {verifier_name} verifier",
        responses=ERROR_RESPONSES,
    )
    async def score(
        body: request_model,  # type: ignore[valid-type]
        runtime: RuntimeDep,
        cache_control: Annotated[str | None, Header(description=CACHE_CONTROL_DESCRIPTION)] = None,
        idempotency_key: Annotated[
            str | None,
            Header(min_length=1, max_length=256, description=IDEMPOTENCY_KEY_DESCRIPTION),
        ] = None,
    ) -> Response:
        """Queue every item, wait for all results (up to ``TRIBUNAL_SYNC_TIMEOUT_S``) and
        return them in request order. An item that cannot be scored has ``reward: null``
        and an ``error``; an item that fails its schema gets a ``bad_input`` error naming
        the field while the rest of the batch is scored. With an ``Idempotency-Key`` the
        batch is the job of that key (as for ``POST /v1/jobs``): a resent request is
        answered from it, scored once; a 504 names the job (``job_id``) to collect later."""
        service = runtime.services[verifier_name]
        started = time.perf_counter()
        text = await service.score(
            body.items,  # type: ignore[attr-defined]
            runtime.settings.sync_timeout_s,
            use_cache=wants_cache(cache_control),
            idempotency_key=idempotency_key,
        )
        runtime.metrics.request_latency.labels(verifier_name, "score").observe(
            time.perf_counter() - started
        )
        return Response(text, media_type="application/json")

    return router
