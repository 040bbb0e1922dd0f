"""A verifier's request and response models, built from its item model.

Items are lenient: one that does not match the verifier's schema is kept as an
:class:`InvalidItem` (its raw value and first error) instead of failing the request, so that
``ScoringService`` answers it ``bad_input`` and scores the rest of the batch. The response
models are what the OpenAPI document shows; the routes answer pre-rendered JSON.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    ValidationError,
    WrapValidator,
    create_model,
)
from pydantic_core import ErrorDetails

from tribunal.core.verifier import DocumentsDetails, TakesStep, Verifier
from tribunal.wire.envelope import (
    ItemResult,
    JobState,
    ScoreItem,
    ScoreResponse,
    item_result_model,
    job_state_model,
    score_response_model,
)
from tribunal.wire.errors import BadInput
from tribunal.wire.hashing import SURROGATE_MESSAGE, encodes_utf8, lone_surrogate, printable


@dataclass(frozen=True)
class InvalidItem:
    """An item that failed its schema; it keeps its raw value and the first error."""

    raw: Any
    errors: list[ErrorDetails]

    def bad_input(self, index: int) -> BadInput:
        """Return the ``BadInput`` for this item at position ``index`` of the batch."""
        first = self.errors[0]
        path = printable(".".join(str(part) for part in ("items", index, *first["loc"])))
        return BadInput(f"{path}: {printable(first['msg'])}", field=path)

    def item_id(self, index: int) -> str:
        """The item's own id when it has a usable one, else its position."""
        raw_id = self.raw.get("id") if isinstance(self.raw, dict) else None
        if isinstance(raw_id, str) and raw_id and encodes_utf8(raw_id):
            return raw_id
        return str(index)


def _keep_invalid(value: Any, handler: Any) -> Any:
    try:
        # A valid item has passed ScoreItem's own lone-surrogate check: only an invalid one
        # is searched again, for the path of its surrogate.
        return handler(value)
    except ValidationError as exc:
        errors = exc.errors()
    found = lone_surrogate(value)
    if found is not None:
        error: ErrorDetails = {
            "type": "string_unicode",
            "loc": found,
            "msg": SURROGATE_MESSAGE,
            "input": None,
        }
        return InvalidItem(raw=value, errors=[error])
    return InvalidItem(raw=value, errors=errors)


def lenient_item(item_model: type[ScoreItem]) -> Any:
    """Return ``item_model`` as an annotated type whose invalid values become ``InvalidItem``.

    The JSON schema (and so OpenAPI) is still ``item_model``'s.
    """
    return Annotated[item_model, WrapValidator(_keep_invalid)]


def score_request_model(verifier: Verifier) -> type[BaseModel]:
    """Build ``<Name>ScoreRequest``: ``{"items": [<item>, ...]}`` with lenient items."""
    name = "".join(part.capitalize() for part in verifier.name.split("_"))
    items_type: Any = list[lenient_item(verifier.item_model)]  # type: ignore[misc]
    model: type[BaseModel] = create_model(
        f"{name}ScoreRequest",
        __config__=ConfigDict(extra="forbid"),
        items=(items_type, Field(min_length=1)),
    )
    return model


def _valid_text(key: str) -> str:
    if lone_surrogate(key) is not None:
        raise ValueError(SURROGATE_MESSAGE)
    return key


IdempotencyKey = Annotated[
    Annotated[str, AfterValidator(_valid_text)] | None,
    Field(
        default=None,
        min_length=1,
        max_length=256,
        description="Client-chosen key: resubmitting the same batch with it returns the same "
        "job instead of scoring twice.",
    ),
]


STEP_DESCRIPTION = (
    "The trainer's step of this batch (optional): each item that carries no step of its own "
    "is at this step, and the verifier's audits and hack signatures are windowed by it; a "
    "job without one is windowed by time."
)

AUDIT_DESCRIPTION = (
    "The auditor of the batch's items that name none of their own (optional): an item's own "
    "`audit` wins. The gateway gives it to its `verifier` items (a `spec` item is audited as "
    "its spec says), sampled per GRPO group at `rate`."
)


def job_request_model(verifier: Verifier) -> type[BaseModel]:
    """Build ``<Name>JobCreate``: ``{"verifier": "<name>", "items": [...], "idempotency_key"}``
    with the verifier's lenient items, one member of the ``/v1/jobs`` union; a verifier that
    takes the trainer's step (``TakesStep``: the gateway) also takes an optional ``step``,
    ``policy_version`` and ``audit`` (its ``audit_model``)."""
    name = "".join(part.capitalize() for part in verifier.name.split("_"))
    items_type: Any = list[lenient_item(verifier.item_model)]  # type: ignore[misc]
    tag: Any = Literal[verifier.name]
    fields: dict[str, Any] = {
        "verifier": (tag, Field(description="Which verifier scores the items.")),
        "items": (items_type, Field(min_length=1)),
        "idempotency_key": (IdempotencyKey, None),
    }
    if isinstance(verifier, TakesStep):
        fields["step"] = (
            StrictInt | None,
            Field(default=None, ge=0, description=STEP_DESCRIPTION),
        )
        fields["policy_version"] = (
            str | None,
            Field(
                default=None,
                max_length=128,
                description="The policy that wrote the batch (optional; a checkpoint name): "
                "each item that carries none has it, recorded with its audit.",
            ),
        )
        fields["audit"] = (
            verifier.audit_model | None,
            Field(default=None, description=AUDIT_DESCRIPTION),
        )
    model: type[BaseModel] = create_model(
        f"{name}JobCreate", __config__=ConfigDict(extra="forbid"), **fields
    )
    return model


def job_body_type(verifiers: Sequence[Verifier]) -> Any:
    """The body of ``POST /v1/jobs``: a union of each verifier's job, tagged by ``verifier``,
    so that the OpenAPI document says exactly what is accepted."""
    models = [job_request_model(v) for v in verifiers]
    if len(models) == 1:
        return models[0]
    return Annotated[Union[tuple(models)], Field(discriminator="verifier")]  # noqa: UP007


def result_model(verifier: Verifier) -> type[ItemResult]:
    """The ``ItemResult`` that documents ``verifier``'s results: ``<Name>ItemResult`` when it
    names its ``details_model``, else ``ItemResult`` (details a free object)."""
    if not isinstance(verifier, DocumentsDetails):
        return ItemResult
    return item_result_model(verifier.name, verifier.details_model)


def score_response_type(verifier: Verifier) -> type[ScoreResponse]:
    """The response model of ``POST /v1/<verifier>/score`` in the OpenAPI document (see
    :func:`result_model`); the route answers pre-rendered JSON, never validated by it."""
    if not isinstance(verifier, DocumentsDetails):
        return ScoreResponse
    return score_response_model(verifier.name, verifier.details_model)


def job_state_type(verifiers: Sequence[Verifier]) -> type[JobState]:
    """The response model of ``GET /v1/jobs/{job_id}`` in the OpenAPI document: a
    ``JobState`` whose results are those of the app's verifiers (see :func:`result_model`)."""
    models = tuple(dict.fromkeys(result_model(v) for v in verifiers))
    return JobState if models == (ItemResult,) else job_state_model(models)
