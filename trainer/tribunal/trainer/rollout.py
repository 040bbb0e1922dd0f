"""Rollouts: one generation interface, its Hugging Face and vLLM backends, and the engine that
turns dataset rows into scored-ready groups.

Shapes: ``G`` completions per prompt; token lists are plain ``list[int]``. A
:class:`Completion` keeps every token after the prompt (model turns and tool output) with a
``loss_mask`` that is 1 for tokens the policy generated and 0 for tool output.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import torch

from tribunal.trainer.engine import token_logprobs

FinishReason = Literal["eos", "stop", "length"]


@dataclass
class Generated:
    """One sampled continuation of a context.

    Attributes:
        token_ids: the new tokens (the EOS token included when generation ended on it).
        logprobs: log π_old of each new token (sampling temperature applied), same length.
        finish_reason: ``eos`` (end of turn), ``stop`` (a stop string, e.g. ``</tool_call>``)
            or ``length`` (budget exhausted).
    """

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: FinishReason


class GenerationBackend(Protocol):
    """What the trainer needs from an inference engine.

    Contract (checked by ``tests/trainer/test_rollout.py`` for every backend):
    ``generate`` returns exactly ``n`` continuations; each has as many log-probabilities as
    tokens, at most ``max_new_tokens`` tokens, and a finish reason; the same ``seed`` gives
    the same continuations; ``sync_weights`` takes ``(name, tensor)`` pairs in the
    training model's parameter names and the next ``generate`` uses them.
    """

    def generate(
        self,
        prompt_ids: Sequence[int],
        n: int,
        max_new_tokens: int,
        seed: int,
        stop: Sequence[str] = (),
    ) -> list[Generated]:
        """Sample ``n`` continuations of ``prompt_ids``."""
        ...

    def sync_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Load new policy weights."""
        ...


@dataclass(frozen=True)
class SamplingConfig:
    """Sampling parameters shared by the backends."""

    temperature: float = 1.0
    top_p: float = 1.0


class HFBackend:
    """Hugging Face ``generate`` on a plain (unsharded) copy of the policy.

    The copy has no ZeRO-3 hooks, so ranks that generate different numbers of tokens never
    wait on each other (ZeRO-3 + ``generate`` hangs otherwise; DeepSpeed#860). After each
    update the trainer copies the gathered parameters in with :meth:`sync_weights`, exactly as
    it would push them to a vLLM engine.

    Args:
        model: a ``PreTrainedModel`` (eval mode is set here).
        tokenizer: its tokenizer (for stop strings and special ids).
        sampling: temperature and top-p.
    """

    def __init__(self, model: Any, tokenizer: Any, sampling: SamplingConfig) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.sampling = sampling
        self._lock = threading.Lock()

    @torch.no_grad()
    def generate(
        self,
        prompt_ids: Sequence[int],
        n: int,
        max_new_tokens: int,
        seed: int,
        stop: Sequence[str] = (),
    ) -> list[Generated]:
        """Sample ``n`` continuations; their log-probabilities come from one forward pass over
        prompt and completion afterwards, with the logits divided by the temperature (what the
        training forward computes).

        Asking ``generate`` for each step's logits instead (``output_logits``) keeps a
        ``(n, V)`` tensor per step through the whole decoding, 151,936 wide for Qwen3, and
        stacks them at the end: about 48 ms per decoding step on an H100 for a 0.49B model.
        One pass after sampling computes the same numbers (equal within float tolerance,
        ``tests/trainer/test_rollout.py``) and lets ``generate`` keep nothing but its cache.
        """
        device = next(self.model.parameters()).device
        ids = torch.tensor([list(prompt_ids)] * n, device=device)
        eos = self.tokenizer.eos_token_id
        with self._lock:
            torch.manual_seed(seed)
            sequences = self.model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                do_sample=True,
                temperature=self.sampling.temperature,
                top_p=self.sampling.top_p,
                top_k=0,
                max_new_tokens=max_new_tokens,
                eos_token_id=eos,
                pad_token_id=self.tokenizer.pad_token_id,
                stop_strings=list(stop) or None,
                tokenizer=self.tokenizer if stop else None,
            )
            new = sequences[:, ids.shape[1] :]
            # Padding after an early end is to the right: a causal forward leaves the
            # log-probabilities of the tokens before it as they are, and _one cuts it off.
            # Only the positions that predict the completion go through the LM head.
            logits = self.model(
                input_ids=sequences,
                attention_mask=torch.ones_like(sequences),
                use_cache=False,
                logits_to_keep=new.shape[1] + 1,
            ).logits[:, :-1]
        logp = token_logprobs(logits.float(), new, self.sampling.temperature)
        return [self._one(new[i], logp[i], eos, stop) for i in range(n)]

    def _one(
        self, tokens: torch.Tensor, logp: torch.Tensor, eos: int, stop: Sequence[str]
    ) -> Generated:
        token_list = tokens.tolist()
        if eos in token_list:
            end = token_list.index(eos) + 1
            return Generated(token_list[:end], logp[:end].tolist(), "eos")
        pad = self.tokenizer.pad_token_id
        end = token_list.index(pad) if pad in token_list and pad != eos else len(token_list)
        text = self.tokenizer.decode(token_list[:end])
        if stop and any(text.rstrip().endswith(s) for s in stop):
            return Generated(token_list[:end], logp[:end].tolist(), "stop")
        return Generated(token_list[:end], logp[:end].tolist(), "length")

    @torch.no_grad()
    def sync_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Copy each tensor into the parameter of the same name."""
        with self._lock:
            for name, tensor in named_tensors:
                self.model.get_parameter(name).data.copy_(tensor)


class VLLMBackend:
    """A vLLM engine in this process (GPU). ``vllm`` is imported only when one is built.

    Weights are pushed with ``LLM.collective_rpc`` into each worker's model
    (``model.load_weights``), which needs ``VLLM_ALLOW_INSECURE_SERIALIZATION=1`` for the
    callable. Tested here only against :class:`GenerationBackend`'s contract with a fake
    ``vllm`` module: vLLM cannot be installed on the CPU machines this suite runs on.

    Args:
        model_path: a local model directory (the policy's initial weights).
        sampling: temperature and top-p.
        engine_kwargs: passed to ``vllm.LLM`` (``gpu_memory_utilization``, ``dtype`` ...).
    """

    def __init__(self, model_path: str, sampling: SamplingConfig, **engine_kwargs: Any) -> None:
        self._vllm = importlib.import_module("vllm")
        self.sampling = sampling
        self._llm = self._vllm.LLM(model=model_path, **engine_kwargs)

    def generate(
        self,
        prompt_ids: Sequence[int],
        n: int,
        max_new_tokens: int,
        seed: int,
        stop: Sequence[str] = (),
    ) -> list[Generated]:
        """Sample ``n`` continuations with vLLM's own log-probabilities of the sampled tokens."""
        params = self._vllm.SamplingParams(
            n=n,
            temperature=self.sampling.temperature,
            top_p=self.sampling.top_p,
            max_tokens=max_new_tokens,
            seed=seed,
            logprobs=0,
            stop=list(stop) or None,
            include_stop_str_in_output=True,
        )
        request = [{"prompt_token_ids": list(prompt_ids)}]
        (output,) = self._llm.generate(request, params, use_tqdm=False)
        return [_from_vllm(choice) for choice in output.outputs]

    def sync_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Send the weights to every vLLM worker."""
        weights = [(name, tensor.detach()) for name, tensor in named_tensors]
        self._llm.collective_rpc(_load_weights, args=(weights,))


def _load_weights(worker: Any, weights: list[tuple[str, torch.Tensor]]) -> None:
    worker.model_runner.model.load_weights(weights=weights)


def _from_vllm(choice: Any) -> Generated:
    tokens = list(choice.token_ids)
    logprobs = [
        float(step[token].logprob) for step, token in zip(choice.logprobs, tokens, strict=True)
    ]
    reason: FinishReason = "length"
    if choice.finish_reason == "stop":
        reason = "stop" if choice.stop_reason is not None else "eos"
    return Generated(tokens, logprobs, reason)


@dataclass
class Completion:
    """One rollout's completion: every token after the prompt.

    Attributes:
        token_ids: model turns and tool output, in order.
        loss_mask: 1 for tokens the policy generated, 0 for tool output (same length).
        old_logprobs: log π_old per token (0.0 for tool output).
        text: the decoded completion (what the verifier scores, as ``response``).
        is_truncated: the response budget ran out before the end of the turn.
        num_turns: assistant turns (1 when single-turn).
        tool_calls: tool calls made.
    """

    token_ids: list[int]
    loss_mask: list[int]
    old_logprobs: list[float]
    text: str
    is_truncated: bool
    num_turns: int = 1
    tool_calls: int = 0


@dataclass
class RolloutGroup:
    """The ``G`` completions of one prompt.

    Attributes:
        index: position of the prompt in its step's batch (unique within a step).
        step: the training step it belongs to.
        prompt_ids: the tokenised prompt (chat template applied).
        row: the dataset row (verifier inputs are read from it).
        completions: G completions.
    """

    index: int
    step: int
    prompt_ids: list[int]
    row: dict[str, Any]
    completions: list[Completion] = field(default_factory=list)


class Rollout(Protocol):
    """Turns one prompt into ``G`` completions (single-turn, or the tool loop)."""

    def complete(self, prompt_ids: list[int], n: int, seed: int) -> list[Completion]:
        """Return ``n`` completions of the prompt."""
        ...


class SingleTurn:
    """One ``generate`` call per group.

    Args:
        backend: the generation backend.
        tokenizer: to decode completions.
        max_response_tokens: budget per completion.
    """

    def __init__(self, backend: GenerationBackend, tokenizer: Any, max_response_tokens: int):
        self.backend = backend
        self.tokenizer = tokenizer
        self.max_response_tokens = max_response_tokens

    def complete(self, prompt_ids: list[int], n: int, seed: int) -> list[Completion]:
        """Return ``n`` single-turn completions."""
        out = self.backend.generate(prompt_ids, n, self.max_response_tokens, seed)
        return [
            Completion(
                token_ids=g.token_ids,
                loss_mask=[1] * len(g.token_ids),
                old_logprobs=g.logprobs,
                text=self.tokenizer.decode(g.token_ids, skip_special_tokens=True),
                is_truncated=g.finish_reason == "length",
            )
            for g in out
        ]


def loss_mask(completions: Sequence[Completion], keep: bool, mask_truncated: bool) -> torch.Tensor:
    """The loss mask of one group: (G, T) float32, T the longest completion (at least 1).

    1 for tokens the policy generated; 0 for tool output, padding, every token of a dropped
    group (``keep=False``) and, with ``mask_truncated``, of truncated completions.
    """
    width = max(1, *(len(c.token_ids) for c in completions))
    mask = torch.zeros(len(completions), width)
    for j, completion in enumerate(completions):
        if keep and not (mask_truncated and completion.is_truncated):
            mask[j, : len(completion.loss_mask)] = torch.tensor(
                completion.loss_mask, dtype=torch.float32
            )
    return mask


def generate_groups(
    rollout: Rollout,
    prompts: Sequence[tuple[int, list[int], dict[str, Any]]],
    step: int,
    group_size: int,
    seed: int,
    on_group: Callable[[RolloutGroup], None],
) -> list[RolloutGroup]:
    """Generate the groups of one step, handing each to ``on_group`` the moment it exists
    (so its scoring starts while the next group is generated).

    Args:
        rollout: single-turn or tool loop.
        prompts: ``(index, prompt_ids, row)`` for this rank's prompts.
        step: training step.
        group_size: G.
        seed: run seed; group ``index`` of ``step`` samples with a seed derived from the
            three, so a group's completions do not depend on the rank that makes them.
        on_group: called once per group, right after its generation.

    Returns:
        The groups, in ``prompts`` order.
    """
    groups = []
    for index, prompt_ids, row in prompts:
        group_seed = seed * 1_000_003 + step * 10_007 + index
        group = RolloutGroup(index, step, prompt_ids, row)
        group.completions = rollout.complete(prompt_ids, group_size, group_seed)
        on_group(group)
        groups.append(group)
    return groups
