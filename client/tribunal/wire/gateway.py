"""The gateway's wire models: its item, its score request and the details of a spec result.

Pydantic only (no FastAPI, Redis or YAML), like every verifier's ``schemas``, so that a
trainer or a client builds and reads gateway payloads without the server's dependencies.

A gateway result's ``details`` are those of whatever scored the item: a ``verifier`` item's
are its verifier's, passed on as they came (``MathDetails``, ``CodeDetails``,
``JudgeDetails``, ``CitationDetails``), a ``spec`` item's are :class:`SpecDetails`, and an
item with an error and nothing else to report has ``{}``. The gateway writes them as dicts
(``tribunal.gateway.scorer``); these models describe them for the OpenAPI document and for
readers, and are never built on the scoring path.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    StrictInt,
    field_validator,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema
from pydantic_core import core_schema as cs

from tribunal.wire.citation import CitationDetails
from tribunal.wire.code import CodeDetails
from tribunal.wire.envelope import ItemError, ScoreItem, VerifierInfo
from tribunal.wire.judge import JudgeDetails
from tribunal.wire.math import MathDetails

VerifierName = Literal["math", "code", "judge", "citation"]
VERIFIERS: tuple[str, ...] = get_args(VerifierName)
"""The verifiers a gateway item or a spec component can name."""

CombineRule = Literal["weighted_sum", "product", "min"]
"""How a spec without a formula combines its components."""

ComponentStatus = Literal["scored", "default", "error", "dropped", "skipped", "undecided"]
"""What became of one component of a spec item: ``scored``; ``default`` (no source applied,
the component's default was used); ``error``; ``dropped`` (errored, and dropped under
``on_error: renormalize``); ``skipped`` (a gate was closed, so it was not computed);
``undecided`` (its verifier could not decide it, a timeout or an internal error, and it took
the spec's ``undecided_reward``: the other components still apply)."""


class ItemAudit(BaseModel):
    """The auditor a direct ``verifier`` item names (or a batch, for its ``verifier`` items
    that name none): a spec served by the gateway and a rate (the share of GRPO groups
    audited, drawn per group as a spec's audit draws them)."""

    model_config = ConfigDict(extra="forbid")

    known_specs: ClassVar[Collection[str] | None] = None
    """The specs ``spec`` may name; None (this class) leaves the name to the gateway, whose
    batch auditor model (``GatewayVerifier.audit_model``) is a subclass that sets them."""

    spec: str = Field(description="The auditor: a spec served by the gateway.")
    rate: float = Field(gt=0.0, le=1.0, description="Share of GRPO groups audited, in (0, 1].")

    @field_validator("spec")
    @classmethod
    def _served(cls, spec: str) -> str:
        if cls.known_specs is not None and spec not in cls.known_specs:
            raise ValueError(f"unknown spec {spec!r}; known: {', '.join(cls.known_specs)}")
        return spec


BATCH_AUDIT_DESCRIPTION = (
    "The auditor of the batch's `verifier` items that name none of their own (optional): an "
    "item's own `audit` wins, and a `spec` item is audited as its spec says. Sampled per GRPO "
    "group at `rate`, aggregated as `@<verifier>><auditor>` in GET /v1/audits."
)


class GatewayItem(ScoreItem):
    """One item for the gateway: a ``verifier`` item or a rollout for a reward ``spec``.

    Besides ``id``, ``group_id`` and exactly one of ``verifier`` and ``spec``, the item
    carries that verifier's fields (``response``, ``ground_truth``, ``tests``, ``rubrics``,
    ``evidence`` ...) or the rollout fields the spec reads.
    """

    model_config = ConfigDict(extra="allow")

    known_specs: ClassVar[Collection[str] | None] = None
    """The specs a ``spec`` may name; None (this class) leaves the name to the gateway, whose
    item model (``GatewayVerifier.item_model``) is a subclass that sets them."""

    verifier: str | None = Field(
        default=None, description="Score with this verifier: math, code, judge or citation."
    )
    spec: str | None = Field(default=None, description="Score with this reward spec.")
    trainer_step: StrictInt | None = Field(
        default=None,
        ge=0,
        description="The trainer's step that wrote this item (optional; never a rollout "
        "field): a batch's `step` is given to each of its items that carries none. A spec "
        "item's audit and hack signatures are windowed by it; without one, by time.",
    )
    policy_version: str | None = Field(
        default=None,
        max_length=128,
        description="The policy that wrote this item (optional; never a rollout field): a "
        "batch's `policy_version` is given to each of its items that carries none. Recorded "
        "with the item's audit (GET /v1/audits).",
    )
    audit: ItemAudit | None = Field(
        default=None,
        description="A `verifier` item's auditor (optional; never sent to the verifier): a "
        "sample of groups is scored again under that spec, aggregated as `@<verifier>` in "
        "GET /v1/audits. A `spec` item is audited as its spec says.",
    )

    @model_validator(mode="after")
    def _known(self) -> GatewayItem:
        if (self.verifier is None) == (self.spec is None):
            raise ValueError("give exactly one of `verifier` and `spec`")
        specs = self.known_specs
        if self.spec is not None and specs is not None and self.spec not in specs:
            raise ValueError(f"spec: unknown spec {self.spec!r}; known: {', '.join(specs)}")
        if self.verifier is not None and self.verifier not in VERIFIERS:
            raise ValueError(f"verifier: one of {', '.join(VERIFIERS)}")
        if self.audit is not None:
            if self.spec is not None:
                raise ValueError("audit: only a `verifier` item names one (a spec's is its own)")
            if specs is not None and self.audit.spec not in specs:
                raise ValueError(f"audit.spec: unknown spec {self.audit.spec!r}")
        return self

    def fields(self) -> dict[str, Any]:
        """The item's own fields (everything but ``verifier``, ``spec``, ``trainer_step``,
        ``policy_version`` and ``audit``)."""
        # Built by hand: model_dump() was a tenth of the gateway's CPU per item.
        fields: dict[str, Any] = {"id": self.id}
        if self.group_id is not None:
            fields["group_id"] = self.group_id
        fields.update(self.__pydantic_extra__ or {})
        return fields


class _DocumentedAs:
    """``Annotated`` metadata: the JSON schema of ``model`` (a reference to it) in place of
    the annotated type's own; validation is the annotated type's, unchanged."""

    def __init__(self, model: type[BaseModel]) -> None:
        self.model = model

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = self.model.__pydantic_core_schema__
        reference = cs.definition_reference_schema(schema["ref"])
        return handler(cs.definitions_schema(reference, [schema]))


class GatewayScoreRequest(BaseModel):
    """A batch of mixed items: each names a `verifier` (math, code, judge, citation) with
    that verifier's fields, or a reward `spec` with the rollout fields the spec reads."""

    model_config = ConfigDict(extra="forbid")

    # Items are taken as objects here and validated one by one afterwards (an invalid item
    # gets its own bad_input result, as on every verifier's route); the document still says
    # what an item is.
    items: list[Annotated[dict[str, Any], _DocumentedAs(GatewayItem)]] = Field(
        min_length=1,
        description='Items: {"id", "verifier": "math", "response", "ground_truth"} or '
        '{"id", "spec": "rloo_math", "response", "ground_truth"}, ...',
    )
    step: StrictInt | None = Field(
        default=None,
        ge=0,
        description="The trainer's step of this batch (optional): each item that carries no "
        "`trainer_step` of its own is at this step. Audits and hack signatures are windowed "
        "by it; a batch without one is windowed by time.",
    )
    policy_version: str | None = Field(
        default=None,
        max_length=128,
        description="The policy that wrote the responses (optional; a checkpoint name): "
        "each item that carries no `policy_version` of its own has it, recorded with its "
        "audit.",
    )
    audit: ItemAudit | None = Field(default=None, description=BATCH_AUDIT_DESCRIPTION)


class SpecInfo(BaseModel):
    """The spec that scored an item (also stamped as the result's ``verifier``:
    ``spec:<name>``, its version and hash)."""

    name: str
    version: str
    hash: str = Field(description="sha256 (16 hex) of the spec's rule (not of its prose).")


class SubReward(BaseModel):
    """What one component of a spec gave for the item."""

    reward: float | None = Field(
        description="The component's reward; null with an error, or when skipped."
    )
    error: ItemError | None = Field(description="Why it has no reward.")
    details: dict[str, Any] = Field(
        description="The component's own details: its verifier's (MathDetails, CodeDetails, "
        "JudgeDetails, CitationDetails), or its built-in's (num_turns: {num_turns, source: "
        "field | counted | unknown, tool_calls, typed_tool_calls}; overlong_penalty: "
        "{response_length, source: field | tokenizer | estimate, max_length, buffer}; "
        "contains: {missing}); {} when skipped, defaulted or failed without details."
    )
    source: str | None = Field(
        description="math / code / judge / citation, or builtin:<name>; null when the "
        "component's default was used or it was skipped."
    )
    verifier: VerifierInfo | None = Field(
        description="The verifier that produced it (remote components only)."
    )
    weight: float = Field(description="The component's weight in the spec.")
    status: ComponentStatus


class SpecDetails(BaseModel):
    """``details`` of a spec item's result (its reward or its error)."""

    spec: SpecInfo
    combine: Literal[CombineRule, "formula"] = Field(
        description="How the components were combined (`formula` when the spec has one)."
    )
    sub_rewards: dict[str, SubReward] = Field(
        description="One entry per component of the spec, in spec order."
    )
    dropped: list[str] = Field(
        description="Components dropped for their errors under `on_error: renormalize`."
    )
    weight_scale: float = Field(
        description="The factor the remaining weights were scaled by (1.0 when none dropped)."
    )
    closed_gate: str | None = Field(
        description="The gate that was closed and set the reward, or null."
    )
    undecided: list[str] = Field(
        default_factory=list,
        description="Components that could not be decided (timeout, internal_error) and took "
        "the spec's `undecided_reward` in place of their value.",
    )
    failed_reward: float | None = Field(
        default=None,
        description="Set on a result with an error: the reward the spec pays this failed "
        "item where a missing reward cannot be carried (its `failed_reward`, else its "
        "`undecided_reward`; what OpenRLHF's and slime's routes pay, and verl's "
        "`compute_score` returns). null on a result with a reward, for an error of the "
        "infrastructure (backend_unavailable, queue_full, queue_unavailable: retry), and "
        "under a spec that sets neither.",
    )


GatewayDetails = SpecDetails | MathDetails | CodeDetails | JudgeDetails | CitationDetails
"""The ``details`` of a gateway result with something to report (see the module docstring)."""
