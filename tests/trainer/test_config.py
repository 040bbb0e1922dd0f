"""The config: every shipped YAML loads, and mistakes are refused with what to change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tribunal.trainer.config import GRPOConfig, expand_variables

CONFIGS = sorted((ROOT / "trainer/tribunal/trainer/configs").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_shipped_configs_load(path: Path) -> None:
    config = GRPOConfig.from_yaml(path)
    assert config.max_steps >= 1


def test_shipped_configs_follow_the_port_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """No shipped config calls a default port that a setting moved: every URL follows its
    service's TRIBUNAL_<SERVICE>_PORT (the gateway's also TRIBUNAL_GATEWAY_URL)."""
    for name, port in (("GATEWAY", "9100"), ("MATH", "9101"), ("CODE", "9102")):
        monkeypatch.setenv(f"TRIBUNAL_{name}_PORT", port)
    urls = []
    for path in CONFIGS:
        config = GRPOConfig.from_yaml(path)
        urls += [source.url for source in config.reward_sources]
        urls += [config.gateway_url] if config.gateway_url else []
        urls += [config.tools.code_url] if config.tools else []
    assert len(urls) == len(CONFIGS) + 2  # two configs with tools
    # compose's trainer reaches the gateway inside the compose network, on its own port
    assert [url for url in urls if ":81" in url] == ["http://gateway:8100"], urls
    assert {url for url in urls if "127.0.0.1" in url} == {
        "http://127.0.0.1:9100",
        "http://127.0.0.1:9101",
        "http://127.0.0.1:9102",
    }
    monkeypatch.setenv("TRIBUNAL_GATEWAY_URL", "http://gw.example:7")
    stack = GRPOConfig.from_yaml(ROOT / "trainer/tribunal/trainer/configs/stack_rloo_cpu.yaml")
    assert stack.gateway_url == "http://gw.example:7"


def test_variables_expand_as_compose_does() -> None:
    env = {"SET": "a", "EMPTY": ""}
    raw = {"x": ["${SET}-${EMPTY:-d}-${UNSET:-${SET:-z}}", 3], "y": {"z": "$SET ${SET:-q}"}}
    assert expand_variables(raw, env) == {"x": ["a-d-a", 3], "y": {"z": "$SET a"}}
    with pytest.raises(ValueError, match=r"t.yaml: \$\{UNSET\} is unset and has no default"):
        expand_variables({"url": "http://${UNSET}"}, env, where="t.yaml")


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
