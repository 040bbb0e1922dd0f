"""A reward spec's combination as OpenEnv's rubric containers, and back.

OpenEnv (``openenv-core`` 0.3.0, ``core/rubrics/containers.py``) composes rubrics with
``WeightedSum(rubrics, weights)`` (weights summing to 1), ``Gate(rubric, threshold)`` (the
child's score at or above ``threshold``, else 0) and ``Sequential(*rubrics)`` (0 as soon as a
child gives 0, else the last child's score). A spec's ``weighted_sum`` with gates maps onto them
as ``Sequential(Gate(g, t) for each gated component, WeightedSum(terms, weights / W))`` times
the scale ``W`` (the sum of the terms' weights): with every gate's closed reward 0 and every
threshold above 0, that is the spec's reward for any component values (a closed gate gives 0 in
both; an open one gives a score of at least its threshold, so ``Sequential`` goes on).

The tree is JSON: ``{"scale": W, "rubric": node}`` with nodes ``{"type": "Sequential",
"rubrics": [...]}``, ``{"type": "Gate", "threshold": t, "rubric": node}``, ``{"type":
"WeightedSum", "weights": [...], "rubrics": [...]}`` and leaves ``{"type": "Component",
"name": ...}`` (a component of the spec: its sources stay in the spec, OpenEnv has no
counterpart). What has no container is refused, naming the field: a ``formula``, ``combine``
``product`` or ``min``, a gate whose closed ``reward`` is not 0 or whose ``threshold`` is not
above 0, and terms whose weights do not sum to a positive number. ``on_error`` and
``undecided_reward`` are the gateway's handling of failures, not of values: they are not part
of the tree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tribunal.gateway.specs import Component, Gate, RewardSpec, SpecError


def spec_to_rubric(spec: RewardSpec) -> dict[str, Any]:
    """The spec's combination as OpenEnv's containers (see the module).

    Raises:
        SpecError: The spec has something no container expresses (the message names it).
    """
    if spec.formula is not None:
        raise SpecError(f"{spec.name}: formula: no OpenEnv container computes a formula")
    if spec.combine != "weighted_sum":
        raise SpecError(f"{spec.name}: combine: {spec.combine} has no OpenEnv container")
    gates: list[dict[str, Any]] = []
    terms: list[tuple[str, float]] = []
    for name, component in spec.components.items():
        if component.gate is None:
            terms.append((name, component.weight))
            continue
        where = f"{spec.name}: components.{name}.gate"
        if component.gate.reward != 0:
            raise SpecError(f"{where}.reward: OpenEnv's Gate gives 0 when closed")
        if component.gate.threshold <= 0:
            raise SpecError(f"{where}.threshold: must be above 0 (Sequential stops at 0)")
        leaf = {"type": "Component", "name": name}
        gates.append({"type": "Gate", "threshold": component.gate.threshold, "rubric": leaf})
    scale = sum(weight for _, weight in terms)
    if not terms or scale <= 0:
        raise SpecError(f"{spec.name}: components: the terms' weights must sum above 0")
    weighted = {
        "type": "WeightedSum",
        "weights": [weight / scale for _, weight in terms],
        "rubrics": [{"type": "Component", "name": name} for name, _ in terms],
    }
    rubric = {"type": "Sequential", "rubrics": [*gates, weighted]} if gates else weighted
    return {"scale": scale, "rubric": rubric}


def rubric_to_spec(
    tree: Mapping[str, Any], components: Mapping[str, Component], *, name: str, version: str
) -> RewardSpec:
    """A spec from OpenEnv's containers (the form :func:`spec_to_rubric` gives) over
    ``components`` (their sources; weights and gates come from the tree).

    Raises:
        SpecError: The tree is not of that form, or names a component not given.
    """
    node = tree.get("rubric")
    scale = tree.get("scale")
    if not isinstance(scale, int | float) or not isinstance(node, Mapping):
        raise SpecError("tree: {'scale': number, 'rubric': node} is required")
    children = node.get("rubrics") if node.get("type") == "Sequential" else [node]
    if not isinstance(children, list) or not children:
        raise SpecError("rubric.rubrics: a list of Gate nodes then a WeightedSum is required")
    *gates, weighted = children
    built: dict[str, Component] = {}
    for gate in gates:
        leaf = _leaf(gate.get("rubric"), components, "Gate.rubric")
        if gate.get("type") != "Gate":
            raise SpecError("rubric.rubrics: every node but the last must be a Gate")
        gated = Gate(threshold=float(gate["threshold"]), reward=0.0)
        built[leaf] = components[leaf].model_copy(update={"gate": gated})
    if weighted.get("type") != "WeightedSum":
        raise SpecError("rubric: the last node must be a WeightedSum")
    weights, leaves = weighted.get("weights", []), weighted.get("rubrics", [])
    if len(weights) != len(leaves):
        raise SpecError("WeightedSum: as many weights as rubrics are required")
    for weight, leaf_node in zip(weights, leaves, strict=True):
        leaf = _leaf(leaf_node, components, "WeightedSum.rubrics")
        update = {"weight": float(weight) * float(scale), "gate": None}
        built[leaf] = components[leaf].model_copy(update=update)
    return RewardSpec(name=name, version=version, components=built)


def _leaf(node: Any, components: Mapping[str, Component], where: str) -> str:
    if not isinstance(node, Mapping) or node.get("type") != "Component":
        raise SpecError(f"{where}: a Component leaf is required")
    name = node.get("name")
    if name not in components:
        raise SpecError(f"{where}: unknown component {name!r}; have {sorted(components)}")
    return str(name)
