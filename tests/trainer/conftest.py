"""Trainer fixtures: a tiny random Qwen3 built once per session, a stand-in reward service."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DATA
from tribunal.testing.tiny_model import TinyModelConfig
from tribunal.trainer.testing import StandInRewardServer, token_share_reward

GSM8K = DATA / "math" / "gsm8k_test.jsonl"

# DeepSpeed 0.19 calls torch 2.13 collectives by their deprecated names and decorates with
# torch.jit.script_method.
TRAINER_WARNINGS = [
    pytest.mark.filterwarnings("ignore:`torch.distributed.all_gather_into_tensor` is deprecated"),
    pytest.mark.filterwarnings("ignore:`torch.distributed.reduce_scatter_tensor` is deprecated"),
    pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated"),
]


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random Qwen3 (hidden 64, 2 layers) with a BPE tokenizer trained on 16 GSM8K prompts."""
    from tribunal.testing.tiny_model import build_tiny_model

    rows = [json.loads(line) for line in GSM8K.read_text().splitlines()[:16]]
    out = tmp_path_factory.mktemp("tiny_model")
    return build_tiny_model(TinyModelConfig(), [r["question"] for r in rows], out, seed=42)


@pytest.fixture
def share_server() -> Iterator[StandInRewardServer]:
    """A reward over real HTTP: the share of the letter ``e`` in the completion."""
    server = StandInRewardServer(token_share_reward("e")).start()
    yield server
    server.stop()


def base_config(model_dir: Path, url: str, **overrides: Any) -> dict[str, Any]:
    """A small run on GSM8K prompts with one reward source at ``url``."""
    return {
        "model": str(model_dir),
        "dataset": str(GSM8K),
        "max_prompts": 8,
        "prompts_per_step": 4,
        "group_size": 8,
        "max_steps": 2,
        "max_prompt_tokens": 256,
        "max_response_tokens": 16,
        "learning_rate": 1e-2,
        "reward_sources": [
            {"name": "share", "url": url, "verifier": "stand_in", "timeout_s": 10, "retries": 1}
        ],
        **overrides,
    }
