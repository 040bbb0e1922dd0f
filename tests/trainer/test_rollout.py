"""Generation backends against the interface's contract (HF ``generate`` on a real tiny model;
vLLM against a fake ``vllm`` module, since vLLM cannot be installed on this CPU machine), and
the tcr tool loop against the real code service, driven by a scripted backend (a random tiny
model never writes a tool call)."""

from __future__ import annotations

import shutil
import sys
import types
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.conftest import RedisServer, RunningService, redis_env
from tests.trainer.conftest import TRAINER_WARNINGS
from tribunal.trainer.rollout import (
    Generated,
    GenerationBackend,
    HFBackend,
    SamplingConfig,
    VLLMBackend,
    loss_mask,
)
from tribunal.trainer.tools import CodeRunner, ToolLoop, parse_tool_call

pytestmark = TRAINER_WARNINGS


def check_contract(backend: GenerationBackend, prompt: list[int], new_weights: Any) -> None:
    """The GenerationBackend contract, for any backend."""
    out = backend.generate(prompt, 3, 5, seed=7)
    assert len(out) == 3
    for gen in out:
        assert 1 <= len(gen.token_ids) <= 5
        assert len(gen.logprobs) == len(gen.token_ids)
        assert all(lp <= 0 for lp in gen.logprobs)
        assert gen.finish_reason in ("eos", "stop", "length")
    again = backend.generate(prompt, 3, 5, seed=7)
    assert [g.token_ids for g in again] == [g.token_ids for g in out]
    backend.sync_weights(new_weights)
    after = backend.generate(prompt, 3, 5, seed=7)
    assert [g.logprobs for g in after] != [g.logprobs for g in out]


def test_hf_backend_meets_the_contract(tiny_model_dir: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    backend = HFBackend(model, tokenizer, SamplingConfig(temperature=1.0))
    prompt = tokenizer.encode("<|im_start|>user\nHow many eggs?<|im_end|>\n<|im_start|>assistant\n")
    weights = [(n, p.detach() * 3) for n, p in model.named_parameters()]
    check_contract(backend, prompt, weights)


class FakeLLM:
    """Stands in for ``vllm.LLM``: tokens drawn from the seed and the loaded weights."""

    def __init__(self, model: str, **kwargs: Any) -> None:
        self.offset = 0.0
        self.worker = types.SimpleNamespace(
            model_runner=types.SimpleNamespace(model=types.SimpleNamespace(load_weights=self._load))
        )

    def _load(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        self.offset = sum(float(t.sum()) for _, t in weights)

    def collective_rpc(self, method: Callable[..., None], args: tuple[Any, ...] = ()) -> None:
        method(self.worker, *args)

    def generate(self, requests: list[dict[str, Any]], params: Any, use_tqdm: bool) -> list[Any]:
        gen = torch.Generator().manual_seed(params.seed)
        outputs = []
        for _ in range(params.n):
            tokens = torch.randint(0, 100, (params.max_tokens,), generator=gen).tolist()
            logprobs = [
                {t: types.SimpleNamespace(logprob=-1.0 - self.offset * 1e-3)} for t in tokens
            ]
            outputs.append(
                types.SimpleNamespace(
                    token_ids=tokens, logprobs=logprobs, finish_reason="length", stop_reason=None
                )
            )
        return [types.SimpleNamespace(outputs=outputs)]


@dataclass
class FakeSamplingParams:
    n: int
    temperature: float
    top_p: float
    max_tokens: int
    seed: int
    logprobs: int
    stop: list[str] | None
    include_stop_str_in_output: bool


def test_vllm_backend_meets_the_contract_with_a_fake_vllm(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = types.ModuleType("vllm")
    fake.LLM = FakeLLM  # type: ignore[attr-defined]
    fake.SamplingParams = FakeSamplingParams  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", fake)
    backend = VLLMBackend("/models/policy", SamplingConfig())
    check_contract(backend, [1, 2, 3], [("w", torch.ones(4))])


def test_parse_tool_call() -> None:
    call = '<tool_call>{"name": "code_interpreter", "arguments": {"code": "print(1)"}}</tool_call>'
    assert parse_tool_call("Let me compute.\n" + call) == "print(1)"
    assert parse_tool_call("<tool_call>{not json}</tool_call>") is None
    assert parse_tool_call('<tool_call>{"name": "search", "arguments": {}}</tool_call>') is None
    assert parse_tool_call("no call here") is None


class ScriptedBackend:
    """Emits the scripted assistant turns in order (a tool call, then an answer), recording
    the context it was asked to continue."""

    def __init__(self, tokenizer: Any, turns: list[tuple[str, str]]) -> None:
        self.tokenizer = tokenizer
        self.turns = turns
        self.contexts: list[list[int]] = []

    def generate(
        self,
        prompt_ids: Sequence[int],
        n: int,
        max_new_tokens: int,
        seed: int,
        stop: Sequence[str] = (),
    ) -> list[Generated]:
        self.contexts.append(list(prompt_ids))
        text, reason = self.turns[min(len(self.contexts) - 1, len(self.turns) - 1)]
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        if reason == "eos":
            ids.append(self.tokenizer.eos_token_id)
        return [Generated(ids, [-0.5] * len(ids), reason)]  # type: ignore[arg-type]

    def sync_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        return None


CALL = '<tool_call>{"name": "code_interpreter", "arguments": {"code": "print(6 * 7)"}}</tool_call>'


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
def test_the_tool_loop_runs_code_on_the_code_service_and_masks_its_output(
    request: pytest.FixtureRequest,
    tiny_model_dir: Path,
    service: Callable[..., RunningService],
    redis_server: RedisServer,
    key_prefix: str,
) -> None:
    from transformers import AutoTokenizer

    env = redis_env(
        redis_server,
        key_prefix,
        TRIBUNAL_CODE_SLOTS="1",
    )
    code = service("code", env=env)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    backend = ScriptedBackend(
        tokenizer, [("Let me run it. " + CALL, "stop"), ("\\boxed{42}", "eos")]
    )
    runner = CodeRunner(code.base_url)
    request.addfinalizer(runner.close)
    loop = ToolLoop(backend, tokenizer, runner, max_turns=16, max_response_tokens=400)
    prompt = tokenizer.encode("<|im_start|>user\nWhat is 6*7?<|im_end|>\n<|im_start|>assistant\n")
    (completion,) = loop.complete(prompt, 1, seed=0)

    first = tokenizer.encode("Let me run it. " + CALL, add_special_tokens=False)
    tool_len = len(backend.contexts[1]) - len(prompt) - len(first)
    answer = [*tokenizer.encode("\\boxed{42}", add_special_tokens=False), tokenizer.eos_token_id]
    assert completion.num_turns == 2 and completion.tool_calls == 1
    assert completion.token_ids[: len(first)] == first
    assert completion.token_ids[-len(answer) :] == answer
    tool_text = tokenizer.decode(completion.token_ids[len(first) : len(first) + tool_len])
    assert "<tool_response>\n42\n</tool_response>" in tool_text
    # the second turn continued the prompt, the first turn and the tool output
    assert backend.contexts[1] == prompt + completion.token_ids[: len(first) + tool_len]

    mask = loss_mask([completion], keep=True, mask_truncated=False)
    assert mask.shape == (1, len(first) + tool_len + len(answer))
    expected = [1.0] * len(first) + [0.0] * tool_len + [1.0] * len(answer)
    assert mask[0].tolist() == expected
    assert completion.old_logprobs[len(first) : len(first) + tool_len] == [0.0] * tool_len

    # a policy that calls the tool every turn stops at the turn limit
    always = ScriptedBackend(tokenizer, [(CALL, "stop")])
    capped = ToolLoop(always, tokenizer, runner, max_turns=3, max_response_tokens=1000)
    (looping,) = capped.complete(prompt, 1, seed=0)
    assert looping.num_turns == 3 and looping.tool_calls == 2


def test_one_pass_logprobs_equal_the_per_step_ones(tiny_model_dir: Path) -> None:
    """The backend's log-probabilities (one forward pass after sampling) against those of
    each decoding step's own logits, for the same sampled tokens."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    temperature = 0.7
    backend = HFBackend(model, tokenizer, SamplingConfig(temperature=temperature))
    prompt = tokenizer.encode("<|im_start|>user\nHow many eggs?<|im_end|>\n<|im_start|>assistant\n")
    got = backend.generate(prompt, 4, 12, seed=3)
    ids = torch.tensor([prompt] * 4)
    torch.manual_seed(3)
    with torch.no_grad():
        out = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            do_sample=True,
            temperature=temperature,
            top_p=1.0,
            top_k=0,
            max_new_tokens=12,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
            return_dict_in_generate=True,
            output_logits=True,
        )
    new = out.sequences[:, ids.shape[1] :]
    steps = torch.log_softmax(torch.stack(out.logits, dim=1).float() / temperature, -1)
    per_step = steps.gather(-1, new.unsqueeze(-1)).squeeze(-1)
    for i, generated in enumerate(got):
        assert generated.token_ids == new[i, : len(generated.token_ids)].tolist()
        expected = per_step[i, : len(generated.token_ids)].tolist()
        assert generated.logprobs == pytest.approx(expected, abs=1e-4)
    assert sum(len(g.token_ids) for g in got) > 8
