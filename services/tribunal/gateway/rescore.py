"""Re-scoring stored rollouts under two reward specs, and the diff (``tribunal rescore``).

Rollouts come as JSONL: the reward inspector's export (``/inspect/api/export.jsonl``: one
record a line, whose ``item`` is the rollout as it was scored) or plain rollouts (one object
a line with ``id`` and the fields a spec reads). Each is scored under spec A and spec B by a
gateway in this process (its verifiers reached at their URLs, ``TRIBUNAL_GATEWAY_*_URL``),
and every item is classed: ``same`` (equal rewards), ``up`` / ``down`` (B pays more / less),
``error_a`` / ``error_b`` (one of them answered an error), ``both_error``.

Re-scoring is safe only where scoring is stateless: the same rollout scored again is
judged on what it holds, not on a state that has moved since (a session, an environment's
world). Each verifier declares it (:data:`REVERIFY`, as NeMo Gym's ``reverify_mode``), and a
spec may declare itself stateful (``reverify: stateful``: its rollouts read a state outside
them); :func:`stateful_reasons` names what makes a spec unsafe, and the command refuses it
without ``--force``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, Literal

import orjson

from tribunal.gateway.specs import LoadedSpec
from tribunal.gateway.verifier import GatewayVerifier, VerifierClient
from tribunal.wire.envelope import ItemOutcome
from tribunal.wire.errors import BadInput

Reverify = Literal["stateless", "stateful"]

REVERIFY: dict[str, Reverify] = {
    "math": "stateless",
    "code": "stateless",
    "judge": "stateless",
    "citation": "stateless",
}
"""Whether re-scoring a stored item on each verifier's score route gives what scoring it
then gave (up to a judge model's sampling): every score route is stateless; the code
service's interpreter sessions, which hold state, are not reachable from a spec."""

ChangeClass = Literal["same", "up", "down", "error_a", "error_b", "both_error"]


def stateful_reasons(loaded: LoadedSpec) -> list[str]:
    """Why re-scoring spec ``loaded`` is unsafe (empty: it is stateless)."""
    reasons = []
    if loaded.spec.reverify == "stateful":
        reasons.append(f"spec {loaded.name} declares reverify: stateful")
    for name, component in loaded.spec.components.items():
        for source in component.one_of:
            if source.verifier and REVERIFY.get(source.verifier) != "stateless":
                reasons.append(f"component {name}: verifier {source.verifier} is stateful")
    return reasons


def read_rollouts(lines: Iterable[bytes | str]) -> list[dict[str, Any]]:
    """The rollouts of JSONL ``lines``: an inspector record's ``item``, or the object itself;
    ``spec`` and ``verifier`` are dropped (the specs compared say how to score). Blank lines
    are skipped.

    Raises:
        BadInput: A line is not a JSON object, or a rollout has no string ``id`` (the line
            is named).
    """
    rollouts = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise BadInput(f"line {number}: not JSON: {exc}", field=f"line {number}") from None
        if isinstance(value, dict) and isinstance(value.get("item"), dict) and "result" in value:
            value = value["item"]
        if not isinstance(value, dict) or not isinstance(value.get("id"), str):
            raise BadInput(f"line {number}: a rollout is an object with a string id", field="id")
        rollouts.append({k: v for k, v in value.items() if k not in ("spec", "verifier")})
    return rollouts


def change_class(a: float | None, b: float | None) -> ChangeClass:
    """The class of one item's change from reward ``a`` to ``b`` (None: an error)."""
    if a is None and b is None:
        return "both_error"
    if a is None:
        return "error_a"
    if b is None:
        return "error_b"
    return "same" if a == b else "up" if b > a else "down"


async def rescore(
    rollouts: list[dict[str, Any]],
    a: LoadedSpec,
    b: LoadedSpec,
    client_factory: Callable[[], VerifierClient],
    batch_items: int = 256,
) -> dict[str, Any]:
    """Score ``rollouts`` under ``a`` and ``b`` and diff them.

    Returns:
        ``{"a": {name, version, hash, origin}, "b": {...}, "items": n, "classes": {class:
        count}, "changed": [{"id", "a", "b", "class", "error_a", "error_b"}]}`` (``changed``:
        every item whose class is not ``same``, in input order).
    """
    gateway = GatewayVerifier({"a": a, "b": b}, client_factory)
    rewards: dict[str, list[ItemOutcome]] = {"a": [], "b": []}
    try:
        for first in range(0, len(rollouts), batch_items):
            chunk = rollouts[first : first + batch_items]
            for side in ("a", "b"):
                items = [gateway.item_model.model_validate({**r, "spec": side}) for r in chunk]
                rewards[side].extend(await gateway.score(items))
    finally:
        await gateway.aclose()
    classes: Counter[str] = Counter()
    changed = []
    for rollout, out_a, out_b in zip(rollouts, rewards["a"], rewards["b"], strict=True):
        kind = change_class(out_a.reward, out_b.reward)
        classes[kind] += 1
        if kind != "same":
            changed.append(
                {
                    "id": rollout["id"],
                    "a": out_a.reward,
                    "b": out_b.reward,
                    "class": kind,
                    "error_a": out_a.error.code if out_a.error else None,
                    "error_b": out_b.error.code if out_b.error else None,
                }
            )
    return {
        "a": {**a.info(), "origin": a.origin},
        "b": {**b.info(), "origin": b.origin},
        "items": len(rollouts),
        "classes": dict(sorted(classes.items())),
        "changed": changed,
    }
