"""The scoring contract every verifier speaks (pydantic only: no FastAPI, no Redis).

A request is a batch of items; each item carries an ``id``, an optional ``group_id`` (the
GRPO group: all completions of one prompt), the verifier's own inputs and ``options``. The
answer holds one :class:`ItemResult` per item, in request order. A failure is never a
reward of 0: an item that could not be scored has ``reward=None`` and an ``error``.
"""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tribunal.core.errors import TribunalError
from tribunal.core.hashing import SURROGATE_MESSAGE, lone_surrogate, printable


class ScoreItem(BaseModel):
    """Fields every item has; each verifier subclasses it with its inputs.

    Unknown fields are refused (``extra="forbid"``) so that a misspelt field name is a
    ``bad_input`` naming it, not a silently ignored input.
    """

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=512, description="Client-chosen item id.")
    group_id: str | None = Field(
        default=None, max_length=512, description="GRPO group: the completions of one prompt."
    )

    @model_validator(mode="before")
    @classmethod
    def _valid_text(cls, data: Any) -> Any:
        # A lone surrogate ("\\ud800") is no Unicode text: it could be neither hashed for the
        # cache nor written in a response (a 500 before). Batch routes name its field first.
        found = lone_surrogate(data)
        if found is not None:
            where = ".".join(str(part) for part in found) or "the item"
            raise ValueError(f"{printable(where)} {SURROGATE_MESSAGE}")
        return data


class ItemError(BaseModel):
    """Why one item has no reward."""

    code: str = Field(description="Error class: timeout, bad_input, backend_unavailable, ...")
    message: str
    retryable: bool = Field(description="Whether sending the same item again can help.")
    field: str | None = Field(default=None, description="The input field at fault, if any.")

    @classmethod
    def from_exception(cls, exc: TribunalError) -> ItemError:
        """Build the item error for a ``TribunalError`` raised while scoring one item."""
        return cls(code=exc.code, message=exc.message, retryable=exc.retryable, field=exc.field)


class ItemOutcome(BaseModel):
    """What a verifier returns for one item, before the core adds id, version and cache flag.

    Exactly one of ``reward`` and ``error`` is set.
    """

    reward: float | None = None
    details: dict[str, Any] = Field(default_factory=dict)
    error: ItemError | None = None
    verifier: VerifierInfo | None = Field(
        default=None,
        description="Set by a verifier that scores through another (the gateway): the "
        "verifier or reward spec that produced this result, stamped instead of its own.",
    )
    cached: bool = Field(default=False, description="The producing verifier served it cached.")

    @classmethod
    def failed(cls, exc: TribunalError, details: dict[str, Any] | None = None) -> ItemOutcome:
        """Build the outcome of an item that could not be scored."""
        return cls(reward=None, details=details or {}, error=ItemError.from_exception(exc))


class VerifierInfo(BaseModel):
    """Names the code and configuration that produced a result, so it can be reproduced."""

    name: str
    version: str
    config_hash: str = Field(description="sha256 (16 hex) of the verifier's configuration.")


class ItemResult(BaseModel):
    """The result of one item, as the API returns it."""

    id: str
    reward: float | None = Field(description="The reward, or null when the item has an error.")
    error: ItemError | None = None
    details: dict[str, Any] = Field(default_factory=dict)
    verifier: VerifierInfo
    cached: bool = Field(default=False, description="Served from the result cache.")


ItemT = TypeVar("ItemT", bound=ScoreItem)


class ScoreRequest(BaseModel, Generic[ItemT]):
    """``POST /v1/<verifier>/score``: a batch of items, scored synchronously."""

    model_config = ConfigDict(extra="forbid")

    items: list[ItemT] = Field(min_length=1)


class ScoreResponse(BaseModel):
    """One result per item, in request order."""

    results: list[ItemResult]


class JobCreate(BaseModel, Generic[ItemT]):
    """``POST /v1/jobs``: queue a batch and come back for its results."""

    model_config = ConfigDict(extra="forbid")

    verifier: str
    items: list[ItemT] = Field(min_length=1)
    idempotency_key: str | None = Field(
        default=None,
        max_length=256,
        description="Client-chosen key: the same key and batch give the same job_id.",
    )


class JobCreated(BaseModel):
    """The id of a queued job."""

    job_id: str
    created: bool = Field(description="False when an idempotency key matched an earlier job.")


class JobState(BaseModel):
    """``GET /v1/jobs/{job_id}``: status and the results so far, in item order."""

    job_id: str
    verifier: str
    status: Literal["pending", "done"]
    total: int
    completed: int
    results: list[ItemResult | None] = Field(
        description="One entry per item in request order; null while that item is pending."
    )


class ErrorBody(BaseModel):
    """The error payload of every 4xx/5xx answer."""

    code: str
    message: str
    field: str | None = None
    retryable: bool = False
    job_id: str | None = Field(
        default=None,
        description="Set when the batch was, or may have been, accepted before the error: "
        "GET /v1/jobs/{job_id} collects its results (404: nothing was enqueued); resending "
        "would score it again.",
    )


class ErrorResponse(BaseModel):
    """``{"error": {...}}``: the one error body of the API."""

    error: ErrorBody
