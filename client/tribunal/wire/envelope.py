"""The scoring contract every verifier speaks (pydantic only: no FastAPI, no Redis).

A request is a batch of items; each item carries an ``id``, an optional ``group_id`` (the
GRPO group: all completions of one prompt), the verifier's own inputs and ``options``. The
answer holds one :class:`ItemResult` per item, in request order. A failure is never a
reward of 0: an item that could not be scored has ``reward=None`` and an ``error``.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Generic, Literal, TypeVar, Union

import orjson
from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from tribunal.wire.errors import InternalError, TribunalError
from tribunal.wire.hashing import SURROGATE_MESSAGE, lone_surrogate, printable

logger = logging.getLogger(__name__)


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

    A scoring verifier sets exactly one of ``reward`` and ``error``. A verifier that gives no
    reward (``code_run``: the run is in ``details``) leaves ``reward`` None, with an
    ``error`` only when it failed.
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
    reward: float | None = Field(
        description="The reward; null when the item has an error, and for `code_run`, which "
        "gives none (the run is in `details`)."
    )
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


class NoDetails(BaseModel):
    """``{}``: the details of an item that has an error and nothing else to report."""

    model_config = ConfigDict(extra="forbid")


def _model_prefix(verifier: str) -> str:
    return "".join(part.capitalize() for part in verifier.split("_"))


@functools.cache
def item_result_model(verifier: str, details: Any) -> type[ItemResult]:
    """Build ``<Name>ItemResult``: an ``ItemResult`` whose ``details`` is ``details`` or ``{}``.

    For the OpenAPI documents only: results reach the wire as JSON written by the workers
    (:func:`result_json`), never validated through this model, so the
    document describes them at no cost per request. Cached, so that every route of an app
    refers to one class (two classes of one name would get mangled names in a document).

    Args:
        verifier: The verifier's name (``code_run`` gives ``CodeRunItemResult``).
        details: Its details model, or a union of models.
    """
    model: type[ItemResult] = create_model(
        f"{_model_prefix(verifier)}ItemResult",
        __base__=ItemResult,
        __doc__=f"The result of one item of the {verifier} verifier, as the API returns it.",
        details=(
            Union[details, NoDetails],  # noqa: UP007 (a run-time union of a run-time type)
            Field(
                default_factory=dict,
                description=f"What the {verifier} verifier reports about the item; {{}} when "
                "the item has an error and nothing else to report.",
            ),
        ),
    )
    return model


@functools.cache
def score_response_model(verifier: str, details: Any) -> type[ScoreResponse]:
    """Build ``<Name>ScoreResponse``: ``{"results": [<Name>ItemResult, ...]}`` (see
    :func:`item_result_model`; for the OpenAPI documents only)."""
    results: Any = list[item_result_model(verifier, details)]  # type: ignore[misc]
    model: type[ScoreResponse] = create_model(
        f"{_model_prefix(verifier)}ScoreResponse",
        __base__=ScoreResponse,
        __doc__=ScoreResponse.__doc__,
        results=(results, ...),
    )
    return model


@functools.cache
def job_state_model(results: tuple[type[ItemResult], ...]) -> type[JobState]:
    """Build the ``JobState`` of an app whose results are one of ``results`` (see
    :func:`item_result_model`; for the OpenAPI documents only)."""
    entry: Any = Union[(*results, None)]
    model: type[JobState] = create_model(
        "JobState",
        __base__=JobState,
        __doc__=JobState.__doc__,
        results=(list[entry], Field(description=JobState.model_fields["results"].description)),
    )
    return model


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


def result_json(
    item_id: str, outcome: ItemOutcome, info: VerifierInfo, *, cached: bool = False
) -> str:
    """Serialise one ``ItemResult``.

    The outcome is a validated model already, so it is written straight from its fields
    with orjson: building and dumping an ``ItemResult`` cost four times as much, once per
    item in every worker and in the gateway. Details that orjson cannot write (a set, a
    model, a non-string key ...) go through pydantic as before; the JSON is the same.
    """
    error, verifier = outcome.error, outcome.verifier or info
    try:
        data: bytes = orjson.dumps(
            {
                "id": item_id,
                "reward": outcome.reward,
                "error": None if error is None else error.__dict__,
                "details": outcome.details,
                "verifier": verifier.__dict__,
                "cached": cached or outcome.cached,
            }
        )
    except orjson.JSONEncodeError:
        try:
            return ItemResult(
                id=item_id,
                reward=outcome.reward,
                error=error,
                details=outcome.details,
                verifier=verifier,
                cached=cached or outcome.cached,
            ).model_dump_json()
        except (ValueError, TypeError) as exc:
            # Unwritable (a lone surrogate in details ...): this item fails, never its batch,
            # which would be redelivered and its other items scored again.
            logger.error("result of item %r cannot be written: %s", item_id, exc)
            failure = ItemError(
                code=InternalError.code,
                message="the item's result could not be written as JSON",
                retryable=False,
            )
            return ItemResult(
                id=item_id, reward=None, error=failure, details={}, verifier=verifier
            ).model_dump_json()
    return data.decode()
