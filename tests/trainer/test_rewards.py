"""Group scoring over real HTTP (the stand-in jobs service): combination of weighted sources,
unscorable items kept as NaN, retryable item errors sent to the failure policy."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from tribunal.trainer.config import GRPOConfig, RewardSourceConfig
from tribunal.trainer.rewards import (
    ItemReward,
    JobsRewardSource,
    RewardFailure,
    build_sources,
    score_group,
)
from tribunal.trainer.rollout import Completion, RolloutGroup
from tribunal.trainer.testing import StandInRewardServer


def group(*texts: str) -> RolloutGroup:
    completions = [Completion([1], [1], [0.0], text, False) for text in texts]
    return RolloutGroup(0, 0, [1], {"answer": "7"}, completions)


@pytest.fixture
def servers() -> Iterator[tuple[StandInRewardServer, StandInRewardServer]]:
    def length(item: dict[str, Any]) -> float | None:
        return None if item["response"] == "?" else float(len(item["response"]))

    def matches(item: dict[str, Any]) -> float:
        return float(item["response"] == item["ground_truth"])

    a, b = StandInRewardServer(length).start(), StandInRewardServer(matches).start()
    yield a, b
    a.stop()
    b.stop()


async def test_weighted_sources_and_unscorable_items(
    servers: tuple[StandInRewardServer, StandInRewardServer],
) -> None:
    length = JobsRewardSource(RewardSourceConfig("length", servers[0].url, "x", weight=0.5))
    exact = JobsRewardSource(
        RewardSourceConfig("exact", servers[1].url, "x", fields={"ground_truth": "answer"})
    )
    scores = await score_group([length, exact], group("7", "12", "?"), "k1", "drop_group")
    assert scores.rewards[:2] == [0.5 * 1 + 1.0, 0.5 * 2 + 0.0]
    assert math.isnan(scores.rewards[2])  # unscorable by one source: unscorable, not 0
    assert scores.item_errors == {"bad_input": 1}
    assert not scores.dropped and not scores.failures
    await length.aclose()
    await exact.aclose()


@pytest.mark.slow
async def test_retryable_item_errors_go_to_the_policy() -> None:
    attempts: list[str] = []

    def flaky(item: dict[str, Any]) -> float | str:
        attempts.append(item["id"])
        return "sandbox_error" if len(attempts) <= 2 else 1.0  # the first job fails

    server = StandInRewardServer(flaky).start()
    source = JobsRewardSource(RewardSourceConfig("s", server.url, "x", retries=1))
    try:
        scores = await score_group([source], group("a", "b"), "k1", "retry")
        assert scores.rewards == [1.0, 1.0] and scores.retries == 1
        assert scores.failures == {"item_sandbox_error": 1}
        attempts.clear()
        dropped = await score_group([source], group("a", "b"), "k2", "drop_group")
        assert dropped.dropped and dropped.retries == 0 and math.isnan(dropped.rewards[0])
    finally:
        await source.aclose()
        server.stop()


@pytest.mark.slow
async def test_a_service_that_is_down_is_retried_then_dropped_or_stops_the_run() -> None:
    server = StandInRewardServer(lambda item: 1.0).start()
    server.stop()
    source = JobsRewardSource(RewardSourceConfig("s", server.url, "x", retries=1))
    try:
        dropped = await score_group([source], group("a", "b"), "k3", "retry")
        assert dropped.dropped and dropped.retries == 1
        assert dropped.failures == {"transport": 2}
        with pytest.raises(RewardFailure, match="transport"):
            await score_group([source], group("a", "b"), "k4", "stop")
    finally:
        await source.aclose()


async def test_the_gateway_form_sends_spec_items_to_the_gateways_jobs() -> None:
    seen: list[dict[str, Any]] = []

    def record(item: dict[str, Any]) -> float:
        seen.append(item)
        return 0.5

    server = StandInRewardServer(record).start()
    config = GRPOConfig.from_dict(
        {
            "model": "/m",
            "dataset": "d.jsonl",
            "gateway_url": server.url,
            "reward_spec": "rloo_math",
            "reward_spec_fields": {"ground_truth": "answer"},
        }
    )
    (source,) = build_sources(config)
    try:
        scores = await score_group([source], group("a", "b"), "k5", "stop")
    finally:
        await source.aclose()
        server.stop()
    assert scores.rewards == [0.5, 0.5]
    assert scores.components == {"rloo_math": [0.5, 0.5]}
    assert seen[0] == {
        "id": "0-0-0",
        "group_id": "0-0",
        "response": "a",
        "ground_truth": "7",
        "spec": "rloo_math",
    }


class SpecSource:
    """A reward spec's answers in-process (the gateway's own are in
    tests/e2e/test_training_stack.py): a reward with two components, the second missing for
    the last completion, or a failure for every group after the first."""

    name, weight, timeout_s, retries, retry_backoff_s = "spec", 1.0, 5.0, 0, 0.0

    def __init__(self) -> None:
        self.calls = 0

    def build_items(self, group: RolloutGroup) -> list[dict[str, Any]]:
        return [{"response": c.text} for c in group.completions]

    async def score(
        self,
        items: list[dict[str, Any]],
        key: str,
        step: int | None,
        policy_version: str | None = None,
    ) -> list[ItemReward]:
        self.calls += 1
        if self.calls > 1:
            raise RewardFailure("transport", "down")
        subs = [{"a": 1.0, "b": 0.5}, {"a": 0.0, "b": None}]
        return [ItemReward(2.0, sub_rewards=s) for s in subs]

    async def aclose(self) -> None:
        pass


async def test_a_specs_components_reach_the_metrics_even_beside_a_dropped_group() -> None:
    import torch

    from tribunal.trainer.metrics import StepTensors, step_metrics

    source = SpecSource()
    groups = [group("x", "y"), group("z", "w")]
    scored = await score_group([source], groups[0], "k6", "drop_group")
    dropped = await score_group([source], groups[1], "k7", "drop_group")
    assert list(scored.components) == ["spec", "spec/a", "spec/b"]
    assert scored.components["spec/a"] == [1.0, 0.0]
    assert scored.components["spec/b"][0] == 0.5 and math.isnan(scored.components["spec/b"][1])
    assert dropped.dropped and list(dropped.components) == ["spec"]
    rewards = torch.tensor([*scored.rewards, *dropped.rewards])
    tensors = StepTensors(groups, [dropped, scored], rewards, torch.zeros(4), torch.zeros(2))
    sums = Counter(
        {"loss": 0.0, "kept_tokens": 1.0, "kl": 0.0, "clipped": 0.0, "ratio": 1.0, "entropy": 0.0}
    )
    metrics = step_metrics(tensors, sums, {"completions": 4.0})
    assert metrics["reward/spec/mean"] == 2.0
    assert metrics["reward/spec/a/mean"] == 0.5 and metrics["reward/spec/a/std"] == 0.5
    assert metrics["reward/spec/b/mean"] == 0.5  # the missing one is not counted as 0
