"""The trainer through the whole stack, on CPU: a tiny random Qwen3 policy on DeepSpeed ZeRO-3
trains for two steps per reward spec against the gateway, with math, code, judge and citation
behind it, every one an API and a worker process on one real Redis; the judge and the
citation scorer grade with a tiny random Qwen3 on the ``transformers`` backend. Data: the
shared DR Tulu-style traces and ScholarQA rubrics, MATH-500 and GSM8K (bench/training_data.py).

A random model's verdicts and answers mean nothing: what is checked is that every completion
is scored through the whole stack, with every component's reward in the trainer's metrics.
The commands are the tutorial's (docs/tutorial-training.md).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.training_data import write_datasets
from tests.conftest import DATA, need_data
from tests.trainer.conftest import TRAINER_WARNINGS
from tribunal.testing.stack import FullStack, RedisServer, free_port, start_full_stack
from tribunal.trainer.config import GRPOConfig, TinyModelConfig
from tribunal.trainer.loop import Trainer

pytestmark = [
    *TRAINER_WARNINGS,
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed"),
]

CONFIGS = Path(__file__).parents[2] / "trainer" / "tribunal" / "trainer" / "configs"

# The spec's components, each of which must appear as reward/<spec>/<component>/mean.
COMPONENTS = {
    "refiner_rubric_citation": ("judge", "citation"),
    "tcr_agent": ("correct", "num_turns", "overlong"),
    "rloo_math": ("math",),
}


def tiny_judge(out: Path) -> Path:
    """The judge's and the citation scorer's model: a random Qwen3 whose tokenizer is trained
    on their prompts' words (no model hub here)."""
    from tribunal.citation.judge import SYSTEM_PROMPT
    from tribunal.trainer.model import build_tiny_model

    sizes = TinyModelConfig(
        hidden_size=32,
        intermediate_size=64,
        head_dim=8,
        vocab_size=500,
        max_position_embeddings=32768,
    )
    corpus = [SYSTEM_PROMPT, '{"c0": {"reason": "", "verdict": 2}}'] * 20
    return build_tiny_model(sizes, corpus, out, seed=0)


def judge_env(model: Path) -> dict[str, dict[str, str]]:
    """The judge and citation services on the transformers backend with ``model``."""
    return {
        "judge": {"TRIBUNAL_JUDGE_BACKEND": "transformers", "TRIBUNAL_JUDGE_MODEL": str(model)},
        "citation": {
            "TRIBUNAL_CITATION_BACKEND": "transformers",
            "TRIBUNAL_CITATION_MODEL": str(model),
            "TRIBUNAL_CITATION_PROCESSES": "1",
        },
    }


@pytest.fixture(scope="module")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    need_data(DATA / "research" / "scholarqa_cs_rubrics.json")
    return write_datasets(tmp_path_factory.mktemp("data"), n=8)


@pytest.fixture(scope="module")
def full_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FullStack]:
    """Redis with an append-only file, the four verifiers and the gateway, started once."""
    tmp = tmp_path_factory.mktemp("stack")
    redis = RedisServer.on_free_port(aof_dir=tmp)
    redis.start()
    env = {"TRIBUNAL_KEY_PREFIX": f"train{free_port()}", "TRIBUNAL_MATH_PROCESSES": "1"}
    try:
        stack = start_full_stack(
            redis.url,
            env=env,
            service_env=judge_env(tiny_judge(tmp / "judge_model")),
            log_dir=tmp / "logs",
        )
    except BaseException:
        redis.stop(0)
        raise
    try:
        yield stack
    except BaseException:
        print(stack.log_text()[-20000:])
        raise
    finally:
        stack.stop()
        redis.stop()


def run_config(spec: str, dataset: Path, stack: FullStack) -> dict[str, Any]:
    """The shipped config of ``spec`` made small for CPU: the tiny policy, two steps of two
    prompts times two completions, 16 new tokens, pointed at the running gateway (and the
    code interpreter at its code service)."""
    name = {"refiner_rubric_citation": "refiner_grpo.yaml"}.get(spec, f"{spec}.yaml")
    raw = yaml.safe_load((CONFIGS / name).read_text())
    raw.pop("model")
    raw.pop("reward_sources", None)
    fields = {
        "refiner_rubric_citation": {
            "question": "question",
            "positive_rubrics": "positive_rubrics",
            "tool_output": "tool_output",
        },
        "tcr_agent": {"ground_truth": "answer"},
        "rloo_math": {"ground_truth": "answer"},
    }[spec]
    raw |= {
        "tiny_model": {"max_position_embeddings": 4096},
        "dataset": str(dataset),
        "max_prompts": 8,
        "prompts_per_step": 2,
        "group_size": 2,
        "max_steps": 2,
        "max_prompt_tokens": 128,
        "max_response_tokens": 16,
        "rollout_backend": "hf",
        "bf16": False,
        "overlong_buffer_tokens": 0,
        "gateway_url": stack.gateway_url,
        "reward_spec": spec,
        "reward_spec_fields": fields,
        "on_reward_failure": "stop",
        "save_every": 0,
    }
    if spec == "refiner_rubric_citation":
        raw["prompt_field"] = "question"
    if "tools" in raw:
        raw["tools"] |= {"code_url": stack.services["code"].base_url, "max_turns": 2}
    return raw


@pytest.mark.parametrize("spec", list(COMPONENTS))
def test_the_trainer_through_the_whole_stack(
    spec: str, full_stack: FullStack, datasets: dict[str, Path], tmp_path: Path
) -> None:
    raw = run_config(spec, datasets[spec], full_stack)
    history = Trainer(GRPOConfig.from_dict(raw), tmp_path / "run").run()
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    logged = [json.loads(line) for line in lines]
    assert [m["step"] for m in logged] == [1, 2] == [m["step"] for m in history]
    for metrics in logged:
        # every completion scored through the gateway; nothing dropped, nothing retried
        assert metrics["reward/scored_fraction"] == 1.0, metrics
        assert metrics["groups/dropped"] == 0 and metrics["groups/retries"] == 0
        assert metrics[f"reward/{spec}/mean"] is not None
        for component in COMPONENTS[spec]:
            assert metrics[f"reward/{spec}/{component}/mean"] is not None, (component, metrics)
        assert not [k for k in metrics if k.startswith(("reward_errors/", "reward_failures/"))]
    assert (tmp_path / "run" / "final" / "config.json").exists()
