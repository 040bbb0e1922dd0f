"""``POST /v1/jobs`` and ``GET /v1/jobs/{job_id}``: queued batches with long-poll."""

# No ``from __future__ import annotations`` here: FastAPI must see the job body type built at
# run time for the app's verifiers as a real annotation, not a string.

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query
from fastapi.responses import Response

from tribunal.core.deps import RuntimeDep, require_api_key
from tribunal.core.request_models import InvalidItem
from tribunal.core.routes.body import JSONRoute
from tribunal.core.routes.responses import ERROR_RESPONSES
from tribunal.core.scoring import CACHE_CONTROL_DESCRIPTION, job_state, wants_cache
from tribunal.core.verifier import TakesStep
from tribunal.wire.envelope import JobCreated, JobState


def jobs_router(job_body: Any, state_model: type[JobState] = JobState) -> APIRouter:
    """Build the job routes; ``job_body`` is ``scoring.job_body_type`` of the app's verifiers,
    ``state_model`` documents ``GET /v1/jobs/{job_id}`` (``scoring.job_state_type``: the route
    answers JSON assembled from the stored results, never validated by it)."""
    router = APIRouter(
        prefix="/v1/jobs",
        tags=["jobs"],
        dependencies=[Depends(require_api_key)],
        route_class=JSONRoute,
    )

    @router.post(
        "",
        status_code=202,
        response_model=JobCreated,
        operation_id="create_job",
        responses=ERROR_RESPONSES,
    )
    async def create_job(
        body: job_body,
        runtime: RuntimeDep,
        cache_control: Annotated[str | None, Header(description=CACHE_CONTROL_DESCRIPTION)] = None,
    ) -> JobCreated:
        """Queue a batch and return its ``job_id`` at once. ``items`` have the schema of the
        named verifier's score request; an invalid item gets a ``bad_input`` result. The
        gateway's job may carry the trainer's ``step``, ``policy_version`` and an ``audit``
        for its ``verifier`` items that name none."""
        service = runtime.services[body.verifier]
        items = body.items
        step = getattr(body, "step", None)
        version = getattr(body, "policy_version", None)
        audit = getattr(body, "audit", None)
        verifier = service.verifier
        given = (step, version, audit) != (None, None, None)
        if given and isinstance(verifier, TakesStep):
            items = [
                i if isinstance(i, InvalidItem) else verifier.at_step(i, step, version, audit)
                for i in items
            ]
        submitted = await service.submit(
            items, body.idempotency_key, use_cache=wants_cache(cache_control)
        )
        return JobCreated(job_id=submitted.job_id, created=submitted.created)

    @router.get(
        "/{job_id}", response_model=state_model, operation_id="get_job", responses=ERROR_RESPONSES
    )
    async def get_job(
        job_id: str,
        runtime: RuntimeDep,
        wait: Annotated[
            float,
            Query(
                ge=0, description="Long-poll: wait up to this many seconds for the job to finish."
            ),
        ] = 0.0,
    ) -> Response:
        """Return the job's status and its results so far (null for pending items). Job ids
        are 32 lowercase hex digits, as ``POST /v1/jobs`` issues them; any other is 404."""
        text = await job_state(runtime.queue, job_id, min(wait, runtime.settings.max_wait_s))
        return Response(text, media_type="application/json")

    return router
