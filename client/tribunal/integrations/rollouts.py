"""Trainer batches -> gateway items, and gateway results -> rewards (``None`` on error).

Shared by the TRL and verl adapters: they differ in how a batch arrives, not in what is sent.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from tribunal.wire.envelope import ItemResult


def message_text(value: Any, role: str | None = None) -> str:
    """The text of a prompt or completion: a string as it is, or the content of the last
    message (of ``role`` when given) of a conversation (TRL's conversational format)."""
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence):
        messages = [m for m in value if isinstance(m, Mapping)]
        if role is not None:
            messages = [m for m in messages if m.get("role") == role] or messages
        if messages:
            content = messages[-1].get("content", "")
            if isinstance(content, str):
                return content
            # Content parts: [{"type": "text", "text": ...}, ...]
            return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return str(value)


class RewardUnavailable(RuntimeError):
    """The gateway could not score an item (its error class and message are in the text)."""


def require_reward(result: ItemResult) -> float:
    """``result``'s reward, for trainers that have no value for "missing".

    Raises:
        RewardUnavailable: The item was refused or could not be scored (``item <id>: <code>
            (<field>): <message>``).
    """
    if result.error is not None or result.reward is None:
        raise RewardUnavailable(failure_text(result))
    return result.reward


def failure_text(result: ItemResult) -> str:
    """Why ``result`` has no reward: ``item <id>: <code> (<field>): <message>``."""
    code = result.error.code if result.error else "internal_error"
    message = result.error.message if result.error else "no reward"
    field = f" ({result.error.field})" if result.error and result.error.field else ""
    return f"item {result.id}: {code}{field}: {message}"


_RESERVED = frozenset({"id", "spec", "verifier", "response", "trainer_step"})
"""Fields a dataset column may not override (the trainer's step is the trainer's to send)."""


def rollout_item(
    index: int,
    target: Mapping[str, str],
    response: str,
    question: str | None,
    fields: Mapping[str, Any],
) -> dict[str, Any]:
    """One gateway item: ``target`` is ``{"spec": name}`` or ``{"verifier": name}``.

    ``group_id`` is a hash of the question, so the completions of one prompt share it.
    """
    item: dict[str, Any] = {"id": str(index), **target, "response": response}
    if question is not None:
        item["question"] = question
        item["group_id"] = hashlib.sha256(question.encode()).hexdigest()[:16]
    item.update({k: v for k, v in fields.items() if v is not None and k not in _RESERVED})
    return item


def rewards_of(results: Sequence[ItemResult]) -> list[float | None]:
    """Each result's reward, ``None`` for an item with an error (TRL reads it as missing)."""
    return [r.reward if r.error is None else None for r in results]


def sub_reward_means(results: Sequence[ItemResult]) -> dict[str, float]:
    """Mean of each spec component's reward over the items that have one (for logging)."""
    sums: dict[str, list[float]] = {}
    for result in results:
        for name, sub in result.details.get("sub_rewards", {}).items():
            if isinstance(sub.get("reward"), int | float):
                sums.setdefault(name, []).append(float(sub["reward"]))
    return {name: sum(values) / len(values) for name, values in sums.items()}
