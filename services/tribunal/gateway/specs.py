"""Reward specs: named, versioned compositions of verifiers, loaded from YAML.

A spec names its **components**, each computed by a verifier (``math``, ``code``, ``judge``,
``citation``: a remote call) or by a small built-in rule evaluated in the gateway
(``num_turns``, ``overlong_penalty``, ``contains``). A component says how a rollout's fields
map onto the verifier's inputs; it may list alternatives (``one_of``), the first whose
``when`` field the rollout carries being used (a coding row goes to ``code``, the others to
``math``), and a ``default`` reward for rollouts none applies to.

The spec then says how the components combine: ``weighted_sum`` (the default), ``product``,
``min``, or a ``formula`` over component names (``tribunal.gateway.expression``); which
components are **gates** (a gate below its threshold sets the reward to the gate's own value
and the other components are not computed); and the **error policy**: ``fail`` (any component
error makes the item an error; the default) or ``renormalize`` (a component whose verifier
was unavailable is dropped and the remaining weights are scaled to the same total; reported
in the details). ``renormalize`` drops only infrastructure failures (``backend_unavailable``,
``queue_full``, ``queue_unavailable``): a failure a response can cause (a ``timeout`` on a
power tower, ``bad_input``) fails the item as ``fail`` does, since scaling up the other
components would pay it.

``score`` says how the reward maps to a score in [0, 1]: a formula over the component names
and ``reward`` (``correct`` for a ±1 reward whose ``correct`` component is 0 or 1). The
trainer routes send it as OpenRLHF's ``scores``, which its dynamic filtering reads: a group is
kept only when its mean score lies strictly between 0 and 1, so a ±1 reward sent as the score
would filter out every group. A spec without ``score`` sends its reward.

``undecided_reward`` is the value a *component* takes when its verifier could not decide it
(a ``timeout`` or ``internal_error``: a power tower sympy cannot finish): only that
component's value is replaced, and the others (an overlong penalty, a tool-call count) still
apply, on every route (``tribunal.gateway.scorer``; the item's ``details.undecided`` names
the components). It is also the item's reward when the formula is undefined for its values
(an overflow; a division by a component is refused at load). Trainer routes mark such items
in ``extra_logs.undecided``. Without it, an undecided component fails the item.

``failed_reward`` is what the trainer routes (OpenRLHF's ``/get_reward``, slime's
``/slime/<spec>``) give an item that failed (a bad label, a query without its prompt, an
error of its own): those trainers hold rewards in tensors, which cannot carry a missing one,
and an HTTP error would cost the whole request. It should be the spec's lowest reward, so
that no failure is paid more than an answer; the item is listed in the answer's ``errors``
(index, code, field), flagged in ``extra_logs.failed``, logged and counted. Without it the
routes use ``undecided_reward``, and a spec with neither is refused on them
(``tribunal.gateway.openrlhf.failed_reward``). On every other route a failed item's result
reports that value in ``details.failed_reward`` (null for a failure of the infrastructure, or
under a spec with neither), for clients whose trainer has no missing value (verl's
``compute_score``: ``tribunal.integrations.verl``).

Specs ship in ``tribunal/gateway/specs/*.yaml`` and can be added from a directory
(``TRIBUNAL_GATEWAY_SPECS_DIR``); every result names the spec's name, version and hash.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from tribunal.gateway.expression import FUNCTIONS, Formula, FormulaError, parse_formula
from tribunal.wire.gateway import CombineRule, VerifierName
from tribunal.wire.hashing import config_hash
from tribunal.wire.math import AnswerFormat

SPEC_ANSWER_FORMAT: AnswerFormat = "marked"
"""The answer format of a spec's math source that declares none: a strict one (a box, a
``####`` line or an ``Answer:`` line, all agreeing), never ``lenient``."""

BuiltinName = Literal["num_turns", "overlong_penalty", "contains"]
SHIPPED_DIR = Path(__file__).parent / "specs"

_NAME = r"^[a-z][a-z0-9_]{0,63}$"


class SpecError(ValueError):
    """A spec file is malformed; the message names the file and the field."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class InputMapping(_Model):
    """Where one verifier input comes from: a rollout field, or a constant.

    In YAML a bare string is a field name (``response: response``); a mapping gives
    ``field`` (with an optional ``default`` for rollouts that lack it and an optional
    ``extract``) or ``value`` (a constant).
    """

    field: str | None = Field(default=None, description="Rollout field to read.")
    value: Any = Field(default=None, description="Constant input (when `field` is not given).")
    default: Any = Field(default=None, description="Used when the rollout lacks `field`.")
    extract: Literal["last_code_block"] | None = Field(
        default=None,
        description="last_code_block: the last ```-fenced block of the text (empty if none).",
    )

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"field": data} if isinstance(data, str) else data

    @model_validator(mode="after")
    def _one_source(self) -> InputMapping:
        if (self.field is None) == (self.value is None):
            raise ValueError("give exactly one of `field` and `value`")
        return self


class Source(_Model):
    """One way to compute a component: a verifier call or a built-in rule."""

    when: str | None = Field(
        default=None, description="Use this source only if the rollout carries this field."
    )
    verifier: VerifierName | None = None
    builtin: BuiltinName | None = None
    inputs: dict[str, InputMapping] = Field(
        default_factory=dict, description="Verifier input -> where it comes from."
    )
    params: dict[str, Any] = Field(default_factory=dict, description="Built-in parameters.")

    @model_validator(mode="before")
    @classmethod
    def _declared_format(cls, data: Any) -> Any:
        """Give a math source the spec default :data:`SPEC_ANSWER_FORMAT` when its constant
        options declare no ``answer_format``, and refuse an unknown one by name."""
        if not isinstance(data, dict) or data.get("verifier") != "math":
            return data
        inputs = dict(data.get("inputs") or {})
        options = inputs.get("options")
        if options is None:
            options = {"value": {}}
        if isinstance(options, dict) and isinstance(options.get("value"), dict):
            value = {"answer_format": SPEC_ANSWER_FORMAT, **options["value"]}
            if value["answer_format"] not in get_args(AnswerFormat):
                choices = ", ".join(get_args(AnswerFormat))
                raise ValueError(
                    f"inputs.options.answer_format: unknown answer format "
                    f"{value['answer_format']!r}; one of {choices}"
                )
            inputs["options"] = {**options, "value": value}
        return {**data, "inputs": inputs}

    @model_validator(mode="after")
    def _one_kind(self) -> Source:
        if (self.verifier is None) == (self.builtin is None):
            raise ValueError("give exactly one of `verifier` and `builtin`")
        if self.builtin is not None:
            check_builtin_params(self.builtin, self.params)
        elif self.params:
            raise ValueError("`params` belong to built-ins; a verifier takes `inputs`")
        return self

    @property
    def kind(self) -> str:
        """``math`` / ``code`` / ... or ``builtin:<name>``."""
        return self.verifier if self.verifier else f"builtin:{self.builtin}"


class Gate(_Model):
    """A gate: below ``threshold`` the item's reward is ``reward`` and nothing else counts."""

    threshold: float = Field(default=1.0, description="The gate is open at or above this.")
    reward: float = Field(default=0.0, description="The item's reward when the gate is closed.")


class Component(_Model):
    """A named term of the reward."""

    description: str = ""
    weight: float = Field(default=1.0, description="Weight in `weighted_sum`.")
    one_of: tuple[Source, ...] = Field(min_length=1, description="Sources, first match wins.")
    default: float | None = Field(
        default=None,
        description="Reward when no source applies (else the item is bad_input).",
    )
    gate: Gate | None = None
    format_only: bool = Field(
        default=False,
        description="It pays for the response's form alone (tags, a marked answer), not its "
        "content: the hack signature `format_share` is the share of the pay such components "
        "give (tribunal.gateway.signatures). Moves no reward, nor the spec's hash.",
    )

    @model_validator(mode="before")
    @classmethod
    def _inline_source(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "one_of" in data:
            return data
        own = {"description", "weight", "default", "gate", "format_only"}
        source = {k: v for k, v in data.items() if k not in own}
        return {**{k: v for k, v in data.items() if k in own}, "one_of": [source]}

    @model_validator(mode="after")
    def _finite(self) -> Component:
        for value in (self.weight, self.default):
            if value is not None and not math.isfinite(value):
                raise ValueError("weights and defaults must be finite numbers")
        return self


WINDOW_STEPS = 10
"""Trainer steps per window of a spec's audits and hack signatures, unless its ``audit`` says."""

WINDOW_S = 60.0
"""Seconds per window of a batch without a step, unless the spec's ``audit`` says."""


class Audit(_Model):
    """A second opinion on a sample of a spec's items (``tribunal.gateway.audit``).

    The items of a sampled GRPO group (``group_id``; an item without one is its own group)
    are scored again, after the trainer's answer, by the spec named ``spec``: the strict
    answer format where training uses a lenient one, another judge model URL, extra hidden
    tests. Its reward never reaches the trainer; it is aggregated per window of trainer
    steps beside the training reward.
    """

    spec: str = Field(pattern=_NAME, description="The auditor: another spec served here.")
    rate: float = Field(gt=0.0, le=1.0, description="Share of GRPO groups audited, in (0, 1].")
    window_steps: int = Field(
        default=WINDOW_STEPS,
        ge=1,
        description="Trainer steps per window of the audits and hack signatures (items that "
        "carry a step).",
    )
    window_s: float = Field(
        default=WINDOW_S,
        gt=0.0,
        description="Seconds per window (items that carry no step).",
    )


class RewardSpec(_Model):
    """A reward spec as written in YAML (see the module docstring)."""

    name: str = Field(pattern=_NAME)
    version: str = Field(min_length=1, max_length=32)
    description: str = ""
    sources: tuple[str, ...] = Field(default=(), description="Papers and code it follows.")
    components: dict[str, Component] = Field(min_length=1)
    combine: CombineRule = "weighted_sum"
    formula: str | None = Field(default=None, description="Overrides `combine` when given.")
    on_error: Literal["fail", "renormalize"] = "fail"
    score: str | None = Field(
        default=None,
        description="The reward as a score in [0, 1] (OpenRLHF's dynamic filtering): a formula "
        "over the component names and `reward`; null: the reward itself.",
    )
    undecided_reward: float | None = Field(
        default=None,
        description="The value of a component whose verifier could not decide it (timeout, "
        "internal_error); the other components still apply. null: such an item fails.",
    )
    failed_reward: float | None = Field(
        default=None,
        description="The reward the trainer routes (OpenRLHF, slime), which cannot carry a "
        "missing one, give an item that failed (bad input, an error of its own); it is listed "
        "with its error. null: `undecided_reward`; a spec with neither is refused there.",
    )
    reverify: Literal["stateless", "stateful"] = Field(
        default="stateless",
        description="stateful: its rollouts read a state outside them (an environment's "
        "world), so `tribunal rescore` refuses it without --force (tribunal.gateway.rescore).",
    )
    audit: Audit | None = Field(
        default=None,
        description="An auditor spec and a rate: a sample of groups scored again, never "
        "answered to the trainer (tribunal.gateway.audit).",
    )
    budget_usd: float | None = Field(
        default=None,
        gt=0.0,
        allow_inf_nan=False,
        description="What its items may spend on model calls (USD, the sum of their "
        "components' details.usage.cost_usd; an audit is charged to the auditor spec); once "
        "spent, its next batch is refused with budget_spent (402) (tribunal.gateway.budget). "
        "null: no bound.",
    )

    @property
    def failed_value(self) -> float | None:
        """The reward of an item that failed, where a missing reward cannot be carried: its
        ``failed_reward``, else its ``undecided_reward``; None when it sets neither."""
        return self.failed_reward if self.failed_reward is not None else self.undecided_reward

    @model_validator(mode="after")
    def _consistent(self) -> RewardSpec:
        for name in ("undecided_reward", "failed_reward"):
            value = getattr(self, name)
            if value is not None and not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number")
        for name in self.components:
            if not re.match(_NAME, name) or name in FUNCTIONS:
                raise ValueError(f"component name {name!r}: lowercase identifier, not a function")
        terms = [c for c in self.components.values() if c.gate is None]
        if not terms and self.formula is None:
            raise ValueError("every component is a gate: nothing to combine")
        self._format_only_summed()
        if self.formula is not None:
            parse_formula(self.formula, set(self.components))  # raises FormulaError
            if self.on_error == "renormalize":
                raise ValueError("on_error: renormalize needs weighted_sum, not a formula")
        elif self.combine != "weighted_sum":
            if any(c.weight != 1.0 for c in terms):
                raise ValueError(f"combine: {self.combine} ignores weights; leave them at 1")
            if self.on_error == "renormalize":
                raise ValueError(f"on_error: renormalize needs weighted_sum, not {self.combine}")
        return self

    def _format_only_summed(self) -> None:
        """Refuse ``format_only`` where a component's share of the reward is not defined.

        Raises:
            ValueError: On a spec that is not a plain weighted sum, or on a gate.
        """
        for name, component in self.components.items():
            if not component.format_only:
                continue
            # Only a weighted sum's reward is a sum of shares, w · r per component.
            if self.formula is not None or self.combine != "weighted_sum":
                raise ValueError(
                    f"components.{name}.format_only: needs combine weighted_sum without a "
                    "formula (a formula's, a product's or a min's reward has no share per "
                    "component)"
                )
            if component.gate is not None:
                raise ValueError(
                    f"components.{name}.format_only: a gate pays nothing itself; declare the "
                    "summed components"
                )


@dataclass(frozen=True)
class LoadedSpec:
    """A validated spec with its parsed formula and hash.

    Attributes:
        spec: The spec.
        hash: 16 hex digits of the sha256 of everything that moves a reward (not the
            description or sources).
        formula: The parsed formula, or None for ``combine``.
        origin: The file it came from.
        score: The parsed ``score`` formula (names: the components and ``reward``), or None.
    """

    spec: RewardSpec
    hash: str
    formula: Formula | None
    origin: str
    score: Formula | None = None

    @property
    def name(self) -> str:
        """The spec's name."""
        return self.spec.name

    @property
    def version(self) -> str:
        """The spec's version."""
        return self.spec.version

    def info(self) -> dict[str, str]:
        """``{"name", "version", "hash"}`` for results."""
        return {"name": self.name, "version": self.version, "hash": self.hash}

    @property
    def windows(self) -> tuple[int, float]:
        """``(steps, seconds)`` per window of its audits and hack signatures: its audit's,
        else :data:`WINDOW_STEPS` and :data:`WINDOW_S`."""
        audit = self.spec.audit
        return (WINDOW_STEPS, WINDOW_S) if audit is None else (audit.window_steps, audit.window_s)

    @cached_property
    def format_terms(self) -> dict[str, bool] | None:
        """Its summed components (not gates), each with whether it is ``format_only``; None
        when none is (no ``format_share`` signature)."""
        terms = {n: c.format_only for n, c in self.spec.components.items() if c.gate is None}
        return terms if any(terms.values()) else None

    def verifiers(self) -> set[str]:
        """Verifiers any component may call."""
        return {s.verifier for c in self.spec.components.values() for s in c.one_of if s.verifier}


def load_spec_text(text: str, origin: str = "<text>") -> LoadedSpec:
    """Parse and validate one spec from YAML text.

    Raises:
        SpecError: Not YAML, not a mapping, a field is wrong (named), or the formula is
            outside the safe grammar.
    """
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SpecError(f"{origin}: not YAML: {exc}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{origin}: a spec is a mapping with name, version and components")
    try:
        spec = RewardSpec.model_validate(data)
        formula = parse_formula(spec.formula, set(spec.components)) if spec.formula else None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "spec"
        raise SpecError(f"{origin}: {where}: {first['msg']}") from None
    except FormulaError as exc:
        raise SpecError(f"{origin}: formula: {exc}") from None
    try:
        score = parse_formula(spec.score, {*spec.components, "reward"}) if spec.score else None
    except FormulaError as exc:
        raise SpecError(f"{origin}: score: {exc}") from None
    # A spec without a score or a failed_reward hashes as it did before the field existed;
    # the audit and the budget move no reward, so a spec's hash is the same with or without.
    exclude = {"description", "sources", "audit", "reverify", "budget_usd"} | {
        name for name in ("score", "failed_reward") if getattr(spec, name) is None
    }
    payload = spec.model_dump(mode="json", exclude=exclude)
    for component in payload["components"].values():
        component.pop("description", None)
        component.pop("format_only", None)  # a signature's declaration: it moves no reward
    return LoadedSpec(
        spec=spec, hash=config_hash(payload), formula=formula, origin=origin, score=score
    )


def load_specs(directories: Iterable[Path]) -> dict[str, LoadedSpec]:
    """Load every ``*.yaml`` spec of ``directories`` (later directories may not redefine one).

    Raises:
        SpecError: A file is malformed, or two files define the same name.
    """
    specs: dict[str, LoadedSpec] = {}
    for directory in directories:
        if not directory.is_dir():
            raise SpecError(f"{directory}: no such directory of reward specs")
        for path in sorted(directory.glob("*.yaml")):
            loaded = load_spec_text(path.read_text(), str(path))
            if loaded.name in specs:
                earlier = specs[loaded.name].origin
                raise SpecError(f"{path}: spec {loaded.name!r} is already defined by {earlier}")
            specs[loaded.name] = loaded
    for loaded in specs.values():
        audit = loaded.spec.audit
        if audit is not None and (audit.spec not in specs or audit.spec == loaded.name):
            raise SpecError(
                f"{loaded.origin}: audit.spec: {audit.spec!r} is not another spec served here"
            )
    return specs


def shipped_specs() -> dict[str, LoadedSpec]:
    """The specs shipped in the package."""
    return load_specs([SHIPPED_DIR])


def check_builtin_params(name: str, params: dict[str, Any]) -> None:
    """Refuse unknown or missing parameters of a built-in (at spec load).

    Raises:
        ValueError: The parameters do not fit the built-in.
    """
    expected: dict[str, set[str]] = {
        "num_turns": {"template"},
        "overlong_penalty": {"max_length", "buffer", "factor", "tokenizer"},
        "contains": {"field", "all_of"},
    }
    required: dict[str, set[str]] = {
        "num_turns": set(),
        "overlong_penalty": {"max_length", "buffer"},
        "contains": {"all_of"},
    }
    unknown = set(params) - expected[name]
    missing = required[name] - set(params)
    if unknown or missing:
        raise ValueError(
            f"builtin {name}: unknown params {sorted(unknown)}, missing {sorted(missing)}"
        )
    if name == "num_turns" and params.get("template", "chatml") not in (
        "chatml",
        "llama3",
        "gemma",
    ):
        raise ValueError("num_turns: template is one of chatml, llama3, gemma")
    if name == "overlong_penalty":
        max_length, buffer = params["max_length"], params["buffer"]
        if not (
            isinstance(max_length, int) and isinstance(buffer, int) and 0 < buffer < max_length
        ):
            raise ValueError("overlong_penalty: integers with 0 < buffer < max_length")
        tokenizer = params.get("tokenizer")
        if tokenizer is not None and not (isinstance(tokenizer, str) and tokenizer):
            raise ValueError("overlong_penalty: tokenizer is a Hugging Face name or path")
    if name == "contains" and not (
        isinstance(params["all_of"], list)
        and params["all_of"]
        and all(isinstance(s, str) and s for s in params["all_of"])
    ):
        raise ValueError("contains: all_of is a non-empty list of non-empty strings")
