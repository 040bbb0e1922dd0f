"""The config: every shipped YAML loads, and mistakes are refused with what to change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tribunal.trainer.config import GRPOConfig

CONFIGS = sorted((ROOT / "trainer/tribunal/trainer/configs").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_shipped_configs_load(path: Path) -> None:
    config = GRPOConfig.from_yaml(path)
    assert config.max_steps >= 1


def test_the_recipes_keep_their_numbers() -> None:
    refiner = GRPOConfig.from_yaml(ROOT / "trainer/tribunal/trainer/configs/refiner_grpo.yaml")
    assert (refiner.prompts_per_step, refiner.group_size, refiner.learning_rate) == (32, 8, 5e-6)
    assert (refiner.beta, refiner.kl_estimator, refiner.seed) == (0.001, "k3", 42)
    assert (refiner.max_prompt_tokens, refiner.max_response_tokens) == (6144, 1024)
    assert refiner.reward_spec == "refiner_rubric_citation"
    tcr = GRPOConfig.from_yaml(ROOT / "trainer/tribunal/trainer/configs/tcr_agent.yaml")
    assert (tcr.epsilon_low, tcr.epsilon_high, tcr.beta, tcr.group_size) == (0.2, 0.28, 0.0, 8)
    assert (tcr.overlong_buffer_tokens, tcr.overlong_penalty_factor) == (3000, 1.0)
    assert tcr.tools is not None and tcr.tools.max_turns == 16 and tcr.tools.tool_call_reward
    assert tcr.loss_aggregation == "token_mean" and tcr.learning_rate == 1e-6
    rloo = GRPOConfig.from_yaml(ROOT / "trainer/tribunal/trainer/configs/rloo_math.yaml")
    assert rloo.advantage_estimator == "rloo" and rloo.beta == 0.0


SOURCE = {"name": "math", "url": "http://127.0.0.1:8101", "verifier": "math"}
BASE: dict[str, Any] = {"model": "/m", "dataset": "d.jsonl", "reward_sources": [SOURCE]}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"model": None}, "exactly one of model"),
        ({"group_size": 1}, "group_size must be >= 2"),
        ({"dual_clip": 0.5}, "dual_clip must be > 1"),
        ({"overlong_buffer_tokens": 600}, "overlong_buffer_tokens must be below"),
        ({"reward_sources": []}, "give either reward_sources"),
        ({"gateway_url": "http://g"}, "needs both gateway_url and reward_spec"),
        ({"reward_sources": [SOURCE, SOURCE]}, "names must be unique"),
        ({"learning_rte": 1e-6}, "unknown config keys \\['learning_rte'\\]"),
        ({"reward_sources": [{**SOURCE, "url": "8101"}]}, "url must start with http"),
    ],
)
def test_mistakes_are_refused_with_what_to_change(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GRPOConfig.from_dict({**BASE, **change})


CHOICE_FIELDS = {
    "rollout_backend": ("hf", "vllm"),
    "async_steps": (0, 1),
    "advantage_estimator": ("grpo", "rloo", "dr_grpo"),
    "std_scaling": ("group", "batch", "none"),
    "loss_aggregation": ("token_mean", "seq_mean_token_mean", "constant"),
    "kl_estimator": ("k1", "k2", "k3"),
    "on_reward_failure": ("drop_group", "retry", "stop"),
}


@pytest.mark.parametrize("name", sorted(CHOICE_FIELDS))
def test_every_option_refuses_an_unknown_value_by_name(name: str) -> None:
    for known in CHOICE_FIELDS[name]:
        assert getattr(GRPOConfig.from_dict({**BASE, name: known}), name) == known
    for unknown in ("bogus", True, 1.0, None):
        with pytest.raises(ValueError, match=f"^{name}: unknown value {unknown!r}; known: "):
            GRPOConfig.from_dict({**BASE, name: unknown})


def test_every_choice_field_is_checked() -> None:
    from typing import get_type_hints

    from tribunal.trainer.config import _literal_choices

    hints = get_type_hints(GRPOConfig)
    assert {n for n, hint in hints.items() if _literal_choices(hint)} == set(CHOICE_FIELDS)
