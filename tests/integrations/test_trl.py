"""TRL's GRPOTrainer, 2 steps on CPU, rewarded by a real gateway in front of a real math
service (processes). The policy is a tiny random Qwen3 built from a config with a tokenizer
trained here: nothing is downloaded. The trainer runs examples/trl_grpo.py in a subprocess
(its own warnings are TRL's business, not this suite's ``filterwarnings = error``)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import pickle
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ROOT, RunningService
from tribunal.integrations.trl import remote_reward
from tribunal.testing.tiny_model import TinyModelConfig, build_tiny_model

# Looked up, not imported: trl, torch and transformers take seconds to import, which every
# collection of the suite paid here; the tests import what they use.
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        any(
            importlib.util.find_spec(name) is None
            for name in ("trl", "torch", "transformers", "tokenizers")
        ),
        reason="needs trl, torch, transformers and tokenizers (the all extra)",
    ),
]


@pytest.fixture(scope="module")
def tiny_qwen3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Save a tiny random Qwen3 and its freshly trained tokenizer; return the directory."""
    sizes = TinyModelConfig(
        hidden_size=32,
        intermediate_size=64,
        head_dim=8,
        vocab_size=400,
        max_position_embeddings=512,
    )
    corpus = ["What is 2 + 3? Put the answer in \\boxed{5}.", "The answer is 7."] * 20
    return build_tiny_model(sizes, corpus, tmp_path_factory.mktemp("tiny-qwen3-grpo"), seed=0)


def gateway_requests(url: str) -> float:
    """How many POST /v1/score requests the gateway has answered (its Prometheus counter)."""
    text = httpx.get(f"{url}/metrics").text
    pattern = r'^tribunal_request_latency_seconds_count\{[^}]*verifier="gateway"[^}]*\} (\S+)$'
    return sum(float(v) for v in re.findall(pattern, text, re.MULTILINE))


def signature_windows(url: str, spec: str, items: int) -> list[dict[str, Any]]:
    """``spec``'s hack signature windows (``GET /v1/signatures``) once ``items`` items are
    counted in them: the gateway counts them after its answer."""
    windows: list[dict[str, Any]] = []
    for _ in range(100):
        specs = httpx.get(f"{url}/v1/signatures").json()["specs"]
        windows = next((s["windows"] for s in specs if s["spec"] == spec), [])
        if sum(w["items"] for w in windows) >= items:
            return windows
        time.sleep(0.1)
    raise AssertionError(f"{items} items of {spec} not counted: {windows}")


@pytest.mark.slow
def test_grpo_trainer_two_steps_on_cpu_against_the_gateway(
    service: Callable[..., RunningService], tiny_qwen3: Path, tmp_path: Path
) -> None:
    memory = {"TRIBUNAL_QUEUE": "memory", "TRIBUNAL_MATH_PROCESSES": "1"}
    math = service("math", env=memory)
    gateway = service("gateway", env={**memory, "TRIBUNAL_GATEWAY_MATH_URL": math.base_url})
    before = gateway_requests(gateway.base_url)
    argv = [
        sys.executable,
        str(ROOT / "examples" / "trl_grpo.py"),
        "--model", str(tiny_qwen3),
        "--gateway", gateway.base_url,
        "--steps", "2",
        "--output-dir", str(tmp_path / "out"),
    ]  # fmt: skip
    run = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-4000:]
    history = json.loads(run.stdout.strip().splitlines()[-1])["log_history"]
    steps = [entry for entry in history if "rewards/tribunal_rloo_math/mean" in entry]
    assert len(steps) == 2
    for entry in steps:
        assert 0.0 <= entry["rewards/tribunal_rloo_math/mean"] <= 1.0
        assert "tribunal_rloo_math/math" in entry  # the component's mean, logged by the function
    # One request per batch: 2 steps, one generation batch each.
    assert gateway_requests(gateway.base_url) - before == 2
    # Each at TRL's global step (0, then 1): four completions each, in the window of step 0.
    windows = signature_windows(gateway.base_url, "rloo_math", 8)
    assert [(w["window"], w["items"]) for w in windows] == [("step:0", 8)]


async def test_errors_become_none_and_a_down_gateway_gives_none_for_all(
    service: Callable[..., RunningService],
) -> None:
    memory = {"TRIBUNAL_QUEUE": "memory", "TRIBUNAL_MATH_PROCESSES": "1"}
    math = service("math", env=memory)
    gateway = service("gateway", env={**memory, "TRIBUNAL_GATEWAY_MATH_URL": math.base_url})
    reward = remote_reward("rloo_math", url=gateway.base_url, columns={"answer": "ground_truth"})
    assert reward.__name__ == "tribunal_rloo_math"
    conversational = [[{"role": "user", "content": "1+1?"}]] * 3
    completions = [
        [{"role": "assistant", "content": "\\boxed{2}"}],
        [{"role": "assistant", "content": "\\boxed{3}"}],
        [{"role": "assistant", "content": "\\boxed{2}"}],
    ]
    logged: dict[str, float] = {}
    rewards = await reward(
        prompts=conversational,
        completions=completions,
        completion_ids=[[1], [2], [3]],
        answer=["2", "2", None],  # the third row has no ground truth: an error, not a 0
        log_metric=logged.__setitem__,
        trainer_state=object(),
    )
    assert rewards == [1.0, 0.0, None]
    assert logged == {"tribunal_rloo_math/math": 0.5}
    down = remote_reward("rloo_math", url="http://127.0.0.1:9", max_retries=0)
    assert await down(prompts=["p"], completions=["c"], ground_truth=["1"]) == [None]
    # AsyncGRPOTrainer pickles its reward functions into the worker it spawns: the copy
    # scores as the original does, and TRL reads it as async under the same name.
    from trl.trainer.utils import get_callable_name, is_async_callable

    copy = pickle.loads(pickle.dumps(reward))
    assert is_async_callable(copy) and get_callable_name(copy) == "tribunal_rloo_math"
    again = await copy(prompts=conversational, completions=completions, answer=["2", "2", "2"])
    assert again == [1.0, 0.0, 1.0]


async def test_the_batch_goes_at_trls_global_step(service: Callable[..., RunningService]) -> None:
    """TRL hands its ``TrainerState`` to reward functions: the batch carries its
    ``global_step``, and the gateway windows the batch's hack signatures by it."""
    memory = {"TRIBUNAL_QUEUE": "memory", "TRIBUNAL_MATH_PROCESSES": "1"}
    from transformers import TrainerState

    math = service("math", env=memory)
    gateway = service("gateway", env={**memory, "TRIBUNAL_GATEWAY_MATH_URL": math.base_url})
    reward = remote_reward("rloo_math", url=gateway.base_url)
    for step, answers in ((7, ["\\boxed{2}", "\\boxed{3}"]), (23, ["\\boxed{2}"])):
        rewards = await reward(
            prompts=["1+1?"] * len(answers),
            completions=answers,
            ground_truth=["2"] * len(answers),
            trainer_state=TrainerState(global_step=step),
        )
        assert rewards == [1.0, 0.0][: len(answers)]
    windows = await asyncio.to_thread(signature_windows, gateway.base_url, "rloo_math", 3)
    # rloo_math has no audit: windows of 10 steps.
    assert [(w["window"], w["items"]) for w in windows] == [("step:0", 2), ("step:20", 1)]
