"""OpenRLHF's body -> gateway items, and results -> OpenRLHF's answer (no HTTP here; the
route itself runs in tests/e2e/test_gateway_service.py)."""

from __future__ import annotations

import pytest

from tribunal.core.envelope import ItemError, ItemResult, VerifierInfo
from tribunal.core.errors import BackendUnavailable, BadInput
from tribunal.gateway.openrlhf import GetRewardRequest, to_items, to_response

INFO = VerifierInfo(name="spec:rloo_math", version="1", config_hash="0" * 16)


def test_queries_become_rollouts() -> None:
    request = GetRewardRequest(
        query=["PROMPT A: \\boxed{4}", "unrelated text", "P2 answer"],
        prompts=["PROMPT A: ", "PROMPT B: ", "P2"],
        labels=["4", '{"positive_rubrics": ["is short"], "ground_truth": "7"}', 12],
    )
    first, second, third = to_items(request, "rloo_math")
    assert first == {
        "id": "0",
        "spec": "rloo_math",
        "response": "\\boxed{4}",
        "question": "PROMPT A: ",
        "ground_truth": "4",
    }
    assert second["response"] == "unrelated text"  # the prompt is not its prefix: kept whole
    assert second["positive_rubrics"] == ["is short"] and second["ground_truth"] == "7"
    assert third["response"] == " answer" and third["ground_truth"] == "12"


def test_lengths_must_agree() -> None:
    with pytest.raises(ValueError, match="labels: 1 entries for 2 queries"):
        GetRewardRequest(query=["a", "b"], labels=["1"])


def result(reward: float | None, error: ItemError | None = None, **subs: float) -> ItemResult:
    details = {"sub_rewards": {name: {"reward": value} for name, value in subs.items()}}
    return ItemResult(id="0", reward=reward, error=error, details=details, verifier=INFO)


def test_answer_shape_and_component_logs() -> None:
    answer = to_response([result(1.0, math=1.0), result(0.0, math=0.0)])
    assert answer.model_dump() == {
        "rewards": [1.0, 0.0],
        "scores": [1.0, 0.0],
        "extra_logs": {"math": [1.0, 0.0]},
    }


@pytest.mark.parametrize(
    ("exc", "status"),
    [(BadInput("ground_truth: Field required"), 422), (BackendUnavailable("down"), 503)],
)
def test_one_failed_item_refuses_the_batch_with_its_class(exc: Exception, status: int) -> None:
    assert isinstance(exc, BadInput | BackendUnavailable)
    error = ItemError.from_exception(exc)
    with pytest.raises(type(exc)) as caught:
        to_response([result(1.0), result(None, error)])
    assert caught.value.http_status == status
    assert "1 of 2 items could not be scored" in caught.value.message
