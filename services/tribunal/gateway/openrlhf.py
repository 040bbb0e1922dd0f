"""OpenRLHF's remote reward protocol (``--remote_rm_url``), spoken by the gateway.

OpenRLHF's trainer posts ``{"query": [...], "prompts": [...], "labels": [...]}`` (``query``
is prompt + response with the chat template applied; ``labels`` come from ``--label_key``)
and reads ``rewards`` (and ``scores``, ``extra_logs``) from the answer: see
``openrlhf/utils/remote_rm_utils.py`` (``remote_rm_fn``) and ``openrlhf/cli/serve_rm.py``
in OpenRLHF/OpenRLHF.

Here each query becomes one rollout for a reward spec: ``response`` is the query with its
prompt removed, ``question`` the prompt, and the label the ``ground_truth``; a label that is
a JSON object is merged into the rollout instead (so a refiner rollout can carry its
rubrics and evidence: ``{"positive_rubrics": [...], "evidence": {...}}``).

OpenRLHF turns ``rewards`` into a tensor and so cannot carry a missing reward: when any item
has an error, the whole request answers that error (its class and status; OpenRLHF retries
a few times and then stops), rather than a made-up number.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tribunal.core.envelope import ItemResult
from tribunal.core.errors import ALL_ERRORS, BadInput, TribunalError

_BY_CODE = {cls.code: cls for cls in ALL_ERRORS}


class GetRewardRequest(BaseModel):
    """``POST /get_reward``: OpenRLHF's request body."""

    model_config = ConfigDict(extra="ignore")

    query: list[str] = Field(min_length=1, description="Prompt + response, templated.")
    prompts: list[str] | None = Field(default=None, description="The prompts, templated.")
    labels: list[Any] | None = Field(
        default=None, description="Ground truths (or JSON objects of rollout fields)."
    )

    @model_validator(mode="after")
    def _same_lengths(self) -> GetRewardRequest:
        for name in ("prompts", "labels"):
            value = getattr(self, name)
            if value is not None and len(value) != len(self.query):
                raise ValueError(f"{name}: {len(value)} entries for {len(self.query)} queries")
        return self


class GetRewardResponse(BaseModel):
    """What OpenRLHF reads: ``rewards`` (advantages), ``scores`` (dynamic filtering) and
    ``extra_logs`` (logged per sample: here each spec component's reward)."""

    rewards: list[float]
    scores: list[float]
    extra_logs: dict[str, list[float]]


def _rollout_fields(label: Any) -> dict[str, Any]:
    if isinstance(label, dict):
        return label
    if isinstance(label, str) and label.lstrip().startswith("{"):
        try:
            parsed = json.loads(label)
        except json.JSONDecodeError:
            return {"ground_truth": label}
        if isinstance(parsed, dict):
            return parsed
    return {"ground_truth": label if isinstance(label, str) else json.dumps(label)}


def to_items(request: GetRewardRequest, spec: str) -> list[dict[str, Any]]:
    """One gateway item per query, for ``spec``."""
    items = []
    for index, query in enumerate(request.query):
        prompt = request.prompts[index] if request.prompts else None
        response = query[len(prompt) :] if prompt and query.startswith(prompt) else query
        item: dict[str, Any] = {"id": str(index), "spec": spec, "response": response}
        if prompt is not None:
            item["question"] = prompt
        if request.labels is not None:
            item.update(_rollout_fields(request.labels[index]))
        items.append(item)
    return items


def to_response(results: list[ItemResult]) -> GetRewardResponse:
    """OpenRLHF's answer, or the first item error raised for the whole request.

    Raises:
        TribunalError: Some item has no reward (its class; the message counts them).
    """
    failed = [r for r in results if r.error is not None or r.reward is None]
    if failed:
        first = failed[0]
        code = first.error.code if first.error else "internal_error"
        message = first.error.message if first.error else "no reward"
        cls = _BY_CODE.get(code, TribunalError)
        raise cls(
            f"{len(failed)} of {len(results)} items could not be scored; OpenRLHF cannot take "
            f"a missing reward, so the batch is refused. First, item {first.id}: {message}",
            field=f"query.{first.id}",
            retry_after_s=1.0 if cls.retryable else None,
        )
    rewards = [float(r.reward) for r in results if r.reward is not None]
    logs: dict[str, list[float]] = {}
    names = results[0].details.get("sub_rewards", {}) if results else {}
    for name in names:
        values = [r.details["sub_rewards"][name]["reward"] for r in results]
        if all(isinstance(v, int | float) for v in values):
            logs[name] = [float(v) for v in values]
    return GetRewardResponse(rewards=rewards, scores=rewards, extra_logs=logs)


def check_spec(spec: str, known: dict[str, Any]) -> None:
    """Raise ``BadInput`` naming the known specs when ``spec`` is not one of them."""
    if spec not in known:
        raise BadInput(f"spec: unknown spec {spec!r}; known: {', '.join(known)}", field="spec")
