"""The scoring rule of a reward spec: component results -> the item's reward and details.

Pure and synchronous: the components have already been computed (remote verifiers or
built-ins); this module applies gates, the error policy and the combination, and refuses
any non-finite value (a NaN or an infinity from a verifier or from the formula is an item
error, never a reward, and never 0).

The details of a spec result are written here as a dict; their shape is
``tribunal.wire.gateway.SpecDetails`` (one ``SubReward`` per component).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

from tribunal.gateway.expression import FormulaError
from tribunal.gateway.specs import LoadedSpec
from tribunal.wire.envelope import ItemError, ItemOutcome, VerifierInfo
from tribunal.wire.errors import INFRASTRUCTURE_CODES, ConfigurationError, InternalError
from tribunal.wire.gateway import ComponentStatus


@dataclass
class ComponentResult:
    """What one component gave for one item.

    Attributes:
        reward: The component's reward, or None with ``error`` (or when skipped).
        error: Why it has no reward.
        details: The verifier's or built-in's details.
        source: ``math`` / ``judge`` / ... or ``builtin:<name>``; None when a default was used.
        verifier: The verifier that produced it (name, version, config hash), if remote.
        status: See ``ComponentStatus``.
    """

    reward: float | None
    error: ItemError | None = None
    details: dict[str, Any] = field(default_factory=dict)
    source: str | None = None
    verifier: VerifierInfo | None = None
    status: ComponentStatus = "scored"

    def to_dict(self, weight: float) -> dict[str, Any]:
        """The JSON-ready entry of ``sub_rewards``."""
        return {
            "reward": self.reward,
            "error": self.error.model_dump() if self.error else None,
            "details": self.details,
            "source": self.source,
            "verifier": self.verifier.model_dump() if self.verifier else None,
            "weight": weight,
            "status": self.status,
        }


UNDECIDED = frozenset({"timeout", "internal_error"})
"""Error classes that mean "the verifier could not decide this component" (a power tower,
a huge factorial): under a spec with ``undecided_reward`` such a component takes that value
and the item is combined as usual (:func:`combine`)."""

DROPPABLE = INFRASTRUCTURE_CODES
"""Error classes ``on_error: renormalize`` drops: the infrastructure's, which no response
can cause. Any other component error fails the item."""


def spec_info(loaded: LoadedSpec) -> VerifierInfo:
    """The ``verifier`` stamped on a spec's results: ``spec:<name>``, its version and hash."""
    return _spec_info(loaded.name, loaded.version, loaded.hash)


@functools.lru_cache(maxsize=256)
def _spec_info(name: str, version: str, hash_: str) -> VerifierInfo:
    # Built once per spec: a model per result was a tenth of the gateway's CPU per item.
    return VerifierInfo(name=f"spec:{name}", version=version, config_hash=hash_)


def gate_closed(loaded: LoadedSpec, results: dict[str, ComponentResult]) -> str | None:
    """Return the first gate (in spec order) whose reward is below its threshold, or None.

    Gates with an error or no result do not count as closed (``combine`` reports them).
    """
    for name, component in loaded.spec.components.items():
        result = results.get(name)
        if component.gate is None or result is None or result.reward is None:
            continue
        if result.reward < component.gate.threshold:
            return name
    return None


def _non_finite_to_error(results: dict[str, ComponentResult]) -> None:
    for name, result in results.items():
        if result.reward is not None and not math.isfinite(result.reward):
            error = InternalError(f"component {name} returned a non-finite reward {result.reward}")
            result.error = ItemError.from_exception(error)
            result.reward, result.status = None, "error"


def _undecided_to_value(value: float | None, results: dict[str, ComponentResult]) -> list[str]:
    """Give each undecided component (:data:`UNDECIDED`) the spec's ``undecided_reward``.

    Only that component's value is replaced; the others (an overlong penalty, a tool-call
    count) still apply, so an undecided answer never escapes them. Without the setting
    nothing changes (the item fails). Returns the names replaced, in order.
    """
    if value is None:
        return []
    names = []
    for name, result in results.items():
        if result.error is not None and result.error.code in UNDECIDED:
            result.reward, result.status = value, "undecided"
            names.append(name)
    return names


def _has_failed(result: ComponentResult) -> bool:
    """An error that was not turned into the spec's ``undecided_reward``."""
    return result.error is not None and result.status != "undecided"


def _item_error(errored: list[tuple[str, ComponentResult]]) -> ItemError:
    """The item's error: the first non-retryable component error, else the first."""
    name, result = next(
        ((n, r) for n, r in errored if r.error and not r.error.retryable), errored[0]
    )
    assert result.error is not None
    names = ", ".join(n for n, _ in errored)
    return ItemError(
        code=result.error.code,
        message=f"component {name}: {result.error.message} (components with errors: {names})",
        retryable=all(r.error is not None and r.error.retryable for _, r in errored),
        field=f"{name}.{result.error.field}" if result.error.field else name,
    )


def combine(loaded: LoadedSpec, results: dict[str, ComponentResult]) -> ItemOutcome:
    """Apply gates, error policy and combination to one item's component results.

    Args:
        loaded: The spec.
        results: One result per component that was computed; components absent here were
            skipped because a gate was closed.

    Returns:
        The item's outcome, stamped with :func:`spec_info`. Its reward is finite, or None
        with an error.
    """
    spec = loaded.spec
    _non_finite_to_error(results)
    details: dict[str, Any] = {
        "spec": loaded.info(),
        "combine": "formula" if loaded.formula else spec.combine,
        "dropped": [],
        "weight_scale": 1.0,
        "closed_gate": None,
        "undecided": _undecided_to_value(spec.undecided_reward, results),
        "failed_reward": None,
    }
    info = spec_info(loaded)
    gate_errors = [
        (n, results[n])
        for n, c in spec.components.items()
        if c.gate and n in results and _has_failed(results[n])
    ]
    closed = gate_closed(loaded, results)
    for name in spec.components:
        results.setdefault(name, ComponentResult(reward=None, status="skipped"))
    if gate_errors:
        return _failed(loaded, results, details, _item_error(gate_errors), info)
    if closed is not None:
        details["closed_gate"] = closed
        gate = spec.components[closed].gate
        assert gate is not None
        return _done(loaded, results, details, gate.reward, info)
    terms = [n for n, c in spec.components.items() if c.gate is None]
    errored = [(n, results[n]) for n in spec.components if _has_failed(results[n])]
    caused = [(n, r) for n, r in errored if r.error and r.error.code not in DROPPABLE]
    if errored and (spec.on_error == "fail" or caused):
        # A failure the response may have caused (a timeout, bad input) is never dropped:
        # the other components scaled up would pay it.
        return _failed(loaded, results, details, _item_error(caused or errored), info)
    if errored:
        for name, result in errored:
            result.status = "dropped"
            details["dropped"].append(name)
        kept = [n for n in terms if not _has_failed(results[n])]
        total = sum(spec.components[n].weight for n in terms)
        kept_total = sum(spec.components[n].weight for n in kept)
        if not kept or kept_total == 0:
            return _failed(loaded, results, details, _item_error(errored), info)
        details["weight_scale"] = total / kept_total
        terms = kept
    try:
        reward = _combine_values(loaded, results, terms) * details["weight_scale"]
    except (FormulaError, ArithmeticError, TypeError) as exc:
        error = ConfigurationError(f"spec {loaded.name}: formula: {exc}")
        return _undefined(loaded, results, details, ItemError.from_exception(error), info)
    if not math.isfinite(reward):
        error = ConfigurationError(f"spec {loaded.name}: the combination gave {reward}")
        return _undefined(loaded, results, details, ItemError.from_exception(error), info)
    return _done(loaded, results, details, reward, info)


def _combine_values(
    loaded: LoadedSpec, results: dict[str, ComponentResult], terms: list[str]
) -> float:
    spec = loaded.spec
    if loaded.formula is not None:
        named = {n: r.reward for n, r in results.items() if r.reward is not None}
        missing = sorted(loaded.formula.names - set(named))
        if missing:
            raise FormulaError(f"no value for {', '.join(missing)}")
        return loaded.formula(named)
    values: list[float] = []
    for name in terms:
        reward = results[name].reward
        if reward is None:
            raise FormulaError(f"{name} has no value")
        values.append(reward)
    if spec.combine == "product":
        return math.prod(values)
    if spec.combine == "min":
        return min(values)
    return sum(spec.components[n].weight * v for n, v in zip(terms, values, strict=True))


def _sub_rewards(loaded: LoadedSpec, results: dict[str, ComponentResult]) -> dict[str, Any]:
    return {n: results[n].to_dict(c.weight) for n, c in loaded.spec.components.items()}


def _done(
    loaded: LoadedSpec,
    results: dict[str, ComponentResult],
    details: dict[str, Any],
    reward: float,
    info: VerifierInfo,
) -> ItemOutcome:
    details["sub_rewards"] = _sub_rewards(loaded, results)
    return ItemOutcome(reward=reward, details=details, verifier=info)


def _undefined(
    loaded: LoadedSpec,
    results: dict[str, ComponentResult],
    details: dict[str, Any],
    error: ItemError,
    info: VerifierInfo,
) -> ItemOutcome:
    """The combination is not defined for these values (an overflow: divisions by a
    component are refused at load): the spec's ``undecided_reward`` when it has one, with
    ``formula`` in ``details.undecided``, else the item's error."""
    value = loaded.spec.undecided_reward
    if value is None:
        return _failed(loaded, results, details, error, info)
    details["undecided"] = [*details["undecided"], "formula"]
    return _done(loaded, results, details, value, info)


def _failed(
    loaded: LoadedSpec,
    results: dict[str, ComponentResult],
    details: dict[str, Any],
    error: ItemError,
    info: VerifierInfo,
) -> ItemOutcome:
    """The item's error, with the reward the spec pays for it where a missing reward cannot
    be carried (``details.failed_reward``: its ``failed_value``, as OpenRLHF's and slime's
    routes pay it); null for an error of the infrastructure (:data:`DROPPABLE`), which a
    retry may cure and which those routes refuse instead."""
    details["sub_rewards"] = _sub_rewards(loaded, results)
    details["failed_reward"] = None if error.code in DROPPABLE else loaded.spec.failed_value
    return ItemOutcome(reward=None, error=error, details=details, verifier=info)
