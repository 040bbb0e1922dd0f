"""slime's remote reward protocol (``--rm-type remote_rm --rm-url``), spoken by the gateway.

slime posts one sample per request, ``{"prompt": ..., "response": ..., "label": ...}``
(``slime/rollout/rm_hub/__init__.py``, ``remote_rm``), raises on a non-2xx answer (after
retrying it ten times) and uses the JSON reply as the sample's reward: a number, or with
``--reward-key K`` a mapping read at ``K``. Here the sample becomes one rollout of a reward
spec, as on OpenRLHF's route: ``response`` is the response, ``question`` the prompt (the text
of its messages when slime sends a chat list), and the label the ``ground_truth``, or, when
it is a JSON object, rollout fields merged in.

slime turns a non-2xx answer, after its retries, into an exception that stops the rollout,
and its reward is a number: so a sample that fails (a null or empty label, an item error of
the spec) is answered 200 with the spec's failed reward, as on OpenRLHF's route
(``tribunal.gateway.openrlhf``), and the failure is in the answer's ``Tribunal-Item-Error``
header (``<code>; field=<field>``), in ``failed: 1`` of ``/slime/<spec>/components``, in the
gateway's log and in ``tribunal_trainer_items_failed_total``. A component the verifiers could
not decide takes the spec's ``undecided_reward``. Only a verifier down or full refuses the
request (retryable, its status), which slime retries.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tribunal.gateway.openrlhf import rollout_fields
from tribunal.wire.errors import BadInput


class SlimeRewardRequest(BaseModel):
    """``POST /slime/{spec}``: slime's ``remote_rm`` payload."""

    model_config = ConfigDict(extra="forbid")

    prompt: str | list[dict[str, Any]] = Field(description="The prompt, or its chat messages.")
    response: str = Field(description="The policy's response.")
    label: Any = Field(default=None, description="The ground truth, or rollout fields.")


def prompt_text(prompt: str | list[dict[str, Any]]) -> str:
    """The prompt as text: a chat list's message contents, one per line."""
    if isinstance(prompt, str):
        return prompt
    return "\n".join(str(m.get("content", "")) for m in prompt if isinstance(m, dict))


def to_item(request: SlimeRewardRequest, spec: str) -> dict[str, Any] | BadInput:
    """The gateway item of one slime sample, for ``spec``, or the ``BadInput`` that fails it:
    a null or empty label (``field="label"``; without it a verifier would score against
    nothing)."""
    if request.label is None or (
        isinstance(request.label, str | list | dict) and not request.label
    ):
        return BadInput(
            "label: slime sends the sample's label (--label-key); it is null or empty",
            field="label",
        )
    item: dict[str, Any] = {"id": "0", "spec": spec, "response": request.response}
    item["question"] = prompt_text(request.prompt)
    item.update(rollout_fields(request.label))
    return item
