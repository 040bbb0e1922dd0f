"""``POST /v1/jobs`` and ``GET /v1/jobs/{job_id}``: queued batches with long-poll."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, field_validator

from tribunal.core.deps import RuntimeDep, require_api_key
from tribunal.core.envelope import JobCreated, JobState
from tribunal.core.errors import BadInput
from tribunal.core.routes.responses import ERROR_RESPONSES
from tribunal.core.scoring import SURROGATE_MESSAGE, job_state, lone_surrogate

router = APIRouter(prefix="/v1/jobs", tags=["jobs"], dependencies=[Depends(require_api_key)])


class JobCreateBody(BaseModel):
    """A batch to queue. ``items`` have the schema of the named verifier's score request."""

    model_config = ConfigDict(extra="forbid")

    verifier: str = Field(description="Which verifier scores the items (e.g. `math`).")
    items: list[Any] = Field(min_length=1, description="Items, as for /v1/<verifier>/score.")
    idempotency_key: str | None = Field(
        default=None,
        min_length=1,
        max_length=256,
        description="Client-chosen key: resubmitting the same batch with it returns the same "
        "job instead of scoring twice.",
    )

    @field_validator("idempotency_key")
    @classmethod
    def _valid_text(cls, key: str | None) -> str | None:
        if key is not None and lone_surrogate(key) is not None:
            raise ValueError(SURROGATE_MESSAGE)
        return key


@router.post(
    "",
    status_code=202,
    response_model=JobCreated,
    operation_id="create_job",
    responses=ERROR_RESPONSES,
)
async def create_job(body: JobCreateBody, runtime: RuntimeDep) -> JobCreated:
    """Queue a batch and return its ``job_id`` at once."""
    service = runtime.services.get(body.verifier)
    if service is None:
        raise BadInput(
            f"verifier: {body.verifier!r} is not served here; this service serves "
            f"{', '.join(sorted(runtime.services))}",
            field="verifier",
        )
    submitted = await service.submit(service.parse_items(body.items), body.idempotency_key)
    return JobCreated(job_id=submitted.job_id, created=submitted.created)


@router.get("/{job_id}", response_model=JobState, operation_id="get_job", responses=ERROR_RESPONSES)
async def get_job(
    job_id: str,
    runtime: RuntimeDep,
    wait: Annotated[
        float,
        Query(ge=0, description="Long-poll: wait up to this many seconds for the job to finish."),
    ] = 0.0,
) -> Response:
    """Return the job's status and its results so far (null for pending items)."""
    text = await job_state(runtime.queue, job_id, min(wait, runtime.settings.max_wait_s))
    return Response(text, media_type="application/json")
