"""OpenRLHF 0.11.2's own remote-reward path, run for tests/integrations/test_openrlhf.py in
OpenRLHF's own environment (.venv-openrlhf: OpenRLHF as its users install it, from
requirements/trainer-envs/openrlhf.txt, and tribunal-client), never in Tribunal's venv.

One process serves the test module: a JSON request a line on stdin, a JSON answer a line on
stdout (what OpenRLHF prints goes to stderr); an exception is the answer ``{"error": {"type",
"message"}}``.

What runs is OpenRLHF's released code: ``SingleTurnAgentExecutor`` (openrlhf/utils/agent.py)
tokenizes the templated prompt, decodes prompt + response with ``skip_special_tokens=False``
and posts ``{"query", "prompts", "labels"}``; ``RolloutRayActor.generate_responses`` runs it
``n_samples_per_prompt`` times; ``SamplesGenerator._generate_vllm`` turns the answers into
``Experience`` objects and applies dynamic filtering; ``RemoteExperienceMaker`` concatenates
them and computes group-normalised advantages; the replay buffer's ``split_experience_batch``
splits a batch back into items. The prompts are built by its ``preprocess_data``
with a tokenizer made here (a byte-level BPE trained on the request's corpus, ChatML template,
EOS ``<|im_end|>``: no hub download), so a finished response's query ends in its EOS as in
training.

Stood in for: ``vllm`` (not installed: it needs a GPU) is a module of names, and the engine's
``llm.generate`` replays scripted token ids; ``flash_attn`` (left out of the environment: its
build compiles CUDA kernels) is names only; ``ray`` (installed) is a module of names whose
remote calls run in place (``ray.get`` / ``ray.wait`` on values already computed): a Ray
cluster of actors on GPUs is not started. The actor and reference forward passes (models on
GPUs behind ray) are not run: the KL they would give is set to zero, as OpenRLHF sets it
without a reference model.

Requests (``op``):

- ``execute``: ``samples`` (each ``{"url", "question", "label", "max_length", "max_tokens",
  "drop"}``: ``drop`` > 0 sets ``max_length`` so that OpenRLHF keeps all of the prompt but
  its first ``drop`` tokens) through ``SingleTurnAgentExecutor.execute``, the engine replaying
  ``script`` (question -> responses, in order); per sample its reward, scores, extra logs, the
  templated prompt and the query as sent.
- ``filter``: ``groups`` (``{"question", "label", "responses"}``, four samples each) through
  ``SamplesGenerator._generate_vllm`` with dynamic filtering in (0, 1), then
  ``RemoteExperienceMaker``'s split and advantages: what was kept and computed.
- ``failed_group``: ``groups`` as for ``filter`` (eight responses each) without dynamic
  filtering: each sample's reward and ``info["failed"]``, the same after
  ``RemoteExperienceMaker``'s advantages and the replay buffer's ``split_experience_batch``,
  the advantages; then with dynamic filtering (the next four responses of each group): the
  groups kept; then the split of a batch one of whose samples lacks ``info["failed"]``: its
  error.
- ``none_reward``: a sample posted to ``url`` (one OpenRLHF cannot score), then its answer
  through ``_process_response_into_experience`` and ``compute_advantages_and_returns``.
- ``train_ppo_ray``: the text of OpenRLHF's ``cli/train_ppo_ray.py`` (its parser is built
  under ``__main__``, so its flags are read from its source).
"""

from __future__ import annotations

import asyncio
import importlib.machinery
import importlib.util
import inspect
import json
import os
import sys
import types
import uuid
from pathlib import Path
from typing import Any

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
EOS = "<|im_end|>"


def _module(name: str, **names: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    # transformers looks packages up with find_spec, which needs a spec.
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)
    module.__dict__.update(names)
    return module


class _Refs:
    """ray, by name: ``@ray.remote`` leaves a class as it is, and an actor's ``.remote``
    calls run in place on one event loop, their values standing for object refs."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        if args and callable(args[0]) and not kwargs:
            return args[0]
        return lambda cls: cls

    def get(self, ref: Any) -> Any:
        return [self.get(r) for r in ref] if isinstance(ref, list) else ref

    def wait(self, refs: list[Any], num_returns: int = 1, **_: Any) -> tuple[list[Any], list[Any]]:
        return refs[:num_returns], refs[num_returns:]

    def handle(self, actor: Any) -> Any:
        """An actor handle: ``handle.method.remote(...)`` runs ``actor.method(...)``."""
        refs = self

        class Handle:
            def __getattr__(self, name: str) -> Any:
                method = getattr(actor, name)

                def remote(*args: Any, **kwargs: Any) -> Any:
                    value = method(*args, **kwargs)
                    return (
                        refs.loop.run_until_complete(value) if inspect.isawaitable(value) else value
                    )

                return types.SimpleNamespace(remote=remote)

        return Handle()


class _SamplingParams:
    """vllm.SamplingParams, by name: its keyword arguments as attributes."""

    def __init__(self, **kwargs: Any) -> None:
        self.__dict__.update(kwargs)


# Answers only on the real stdout: what OpenRLHF and its libraries print (DeepSpeed's logger
# holds sys.stdout from its import on) goes to stderr, file descriptor 1 included.
ANSWERS = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
sys.stdout = sys.stderr

REFS = _Refs()
sys.modules.update(
    {
        "ray": _module("ray", remote=REFS.remote, get=REFS.get, wait=REFS.wait, put=REFS.get),
        "ray.util": _module("ray.util"),
        "ray.util.placement_group": _module(
            "ray.util.placement_group", PlacementGroup=object, placement_group=None
        ),
        "ray.util.scheduling_strategies": _module(
            "ray.util.scheduling_strategies", PlacementGroupSchedulingStrategy=object
        ),
        "vllm": _module("vllm", SamplingParams=_SamplingParams, __version__="0.29.0"),
        "vllm.inputs": _module("vllm.inputs", TokensPrompt=dict),
        "vllm.utils": _module("vllm.utils", random_uuid=lambda: uuid.uuid4().hex),
        "flash_attn": _module("flash_attn"),
        "flash_attn.bert_padding": _module(
            "flash_attn.bert_padding",
            index_first_axis=None,
            pad_input=None,
            rearrange=None,
            unpad_input=None,
        ),
        "flash_attn.utils": _module("flash_attn.utils"),
        "flash_attn.utils.distributed": _module("flash_attn.utils.distributed", all_gather=None),
    }
)

from openrlhf.datasets.prompts_dataset import preprocess_data  # noqa: E402
from openrlhf.trainer.ppo_utils.experience import split_experience_batch  # noqa: E402
from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker  # noqa: E402
from openrlhf.trainer.ppo_utils.kl_controller import FixedKLController  # noqa: E402
from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator  # noqa: E402
from openrlhf.trainer.ray.vllm_engine import RolloutRayActor  # noqa: E402
from openrlhf.utils.agent import SingleTurnAgentExecutor  # noqa: E402


def make_tokenizer(corpus: list[str]) -> Any:
    """A byte-level BPE tokenizer trained on ``corpus`` (exact round trip), ChatML, EOS
    ``<|im_end|>``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", EOS]
    model = Tokenizer(models.BPE())
    model.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    model.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    model.train_from_iterator(corpus, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=model,
        eos_token=EOS,
        pad_token="<|endoftext|>",
        clean_up_tokenization_spaces=False,
    )
    fast.chat_template = CHATML
    return fast


class ScriptedLLM:
    """vLLM's engine, stood in for: each prompt's responses, in order, as token ids ending in
    the EOS (a finished sequence), as ``AsyncLLMEngine.generate`` yields them."""

    def __init__(self, tokenizer: Any, script: dict[str, list[str]]) -> None:
        self.tokenizer = tokenizer
        self.script = {prompt: list(responses) for prompt, responses in script.items()}
        self.output_processor = types.SimpleNamespace(get_num_unfinished_requests=lambda: 0)

    async def generate(self, prompt: dict[str, Any], params: Any, request_id: str) -> Any:
        text = self.tokenizer.decode(prompt["prompt_token_ids"], skip_special_tokens=False)
        # A prompt OpenRLHF truncated to its last tokens is its scripted prompt's end.
        key = text if text in self.script else next(k for k in self.script if k.endswith(text))
        response = self.script[key].pop(0)
        ids = self.tokenizer(text=response, add_special_tokens=False)["input_ids"]
        ids.append(self.tokenizer.eos_token_id)
        output = types.SimpleNamespace(
            token_ids=ids, text=response + EOS, finish_reason="stop", logprobs=None
        )
        yield types.SimpleNamespace(outputs=[output])


def rollout_actor(url: str, llm: ScriptedLLM) -> Any:
    """OpenRLHF's ``RolloutRayActor`` with its vLLM engine stood in for (its ``__init__``
    starts vLLM on a GPU, so the two fields it sets are set here)."""
    actor = object.__new__(RolloutRayActor)
    actor.executor = SingleTurnAgentExecutor(url)
    actor.llm = llm
    actor._mm_pad_token_ids = set()
    return actor


def prompt_of(tokenizer: Any, question: str, label: str) -> tuple[str, str]:
    """OpenRLHF's dataset preprocessing (``--data.apply_chat_template``)."""
    data = {"question": question, "answer": label}
    prompt, label = preprocess_data(
        data,
        input_key="question",
        label_key="answer",
        apply_chat_template=tokenizer.apply_chat_template,
    )
    return prompt, label


def scripted(tokenizer: Any, script: dict[str, list[str]]) -> tuple[ScriptedLLM, dict[str, str]]:
    """The engine replaying ``script`` (question -> responses), and each question's prompt."""
    prompts = {question: prompt_of(tokenizer, question, "")[0] for question in script}
    llm = ScriptedLLM(tokenizer, {prompts[q]: responses for q, responses in script.items()})
    return llm, prompts


def execute(
    actor: Any, tokenizer: Any, prompt: str, label: Any, max_length: int, max_tokens: int | None
) -> dict[str, Any]:
    """One sample through ``SingleTurnAgentExecutor.execute``, as a rollout worker runs it
    (``--max_len`` and ``--max_new_tokens``: OpenRLHF keeps a prompt's last ``max_length -
    max_tokens`` tokens)."""
    params = _SamplingParams(max_tokens=max_tokens, logprobs=None)
    coroutine = actor.executor.execute(prompt, label, params, max_length, tokenizer, actor)
    answer: dict[str, Any] = REFS.loop.run_until_complete(coroutine)
    return answer


def op_execute(request: dict[str, Any], tokenizer: Any) -> list[dict[str, Any]]:
    llm, prompts = scripted(tokenizer, request["script"])
    answers = []
    for sample in request["samples"]:
        prompt = prompts[sample["question"]]
        max_length, max_tokens = sample.get("max_length", 2048), sample.get("max_tokens")
        if sample.get("drop"):
            kept = len(tokenizer(text=prompt, add_special_tokens=False)["input_ids"])
            max_length, max_tokens = kept - sample["drop"] + 256, 256
        actor = rollout_actor(sample["url"], llm)
        out = execute(actor, tokenizer, prompt, sample["label"], max_length, max_tokens)
        answers.append(
            {
                "reward": out["reward"],
                "scores": out["scores"],
                "extra_logs": out["extra_logs"],
                "prompt": prompt,
                "query": tokenizer.decode(out["observation_tokens"], skip_special_tokens=False),
            }
        )
    return answers


def ppo_strategy() -> Any:
    """The arguments OpenRLHF's sample generator and experience maker read: groups of 4,
    group-normalised advantages, dynamic filtering's default range (0, 1)."""
    args = types.SimpleNamespace(
        rollout=types.SimpleNamespace(n_samples_per_prompt=4, micro_batch_size=4),
        algo=types.SimpleNamespace(
            dynamic_filtering_range=(0.0, 1.0),
            advantage=types.SimpleNamespace(
                estimator="group_norm", is_correction_level="off", gamma=1.0, no_std_norm=False
            ),
            kl=types.SimpleNamespace(use_loss=False),
        ),
        reward=types.SimpleNamespace(clip_range=(-10.0, 10.0)),
        train=types.SimpleNamespace(dynamic_batch_enable=False),
        data=types.SimpleNamespace(max_len=2048),
    )
    return types.SimpleNamespace(args=args)


class Groups:
    """``groups`` (``{"question", "label", "responses"}``) through OpenRLHF's
    ``SamplesGenerator`` (its rollout actor posting to ``url``) and ``RemoteExperienceMaker``
    with :func:`ppo_strategy`; each ``generate`` takes the next four of a group's responses."""

    def __init__(self, url: str, groups: list[dict[str, Any]], tokenizer: Any) -> None:
        llm, prompts = scripted(tokenizer, {g["question"]: g["responses"] for g in groups})
        strategy = ppo_strategy()
        actor = REFS.handle(rollout_actor(url, llm))
        self.generator = SamplesGenerator(strategy, None, None, tokenizer, [actor])
        self.maker = RemoteExperienceMaker(
            None, None, None, None, FixedKLController(0.0), strategy, tokenizer
        )
        self.prompts = [prompts[g["question"]] for g in groups]
        self.labels = [g["label"] for g in groups]

    def generate(self, dynamic_filtering: bool) -> tuple[list[Any], int, bool]:
        """``_generate_vllm``'s samples (``Experience`` objects), prompts consumed, and
        whether the prompts ran out."""
        batches = iter([(None, self.prompts, self.labels, [None] * len(self.prompts))])
        samples, consumed, exhausted = self.generator._generate_vllm(
            batches,
            num_prompts=len(self.prompts),
            dynamic_filtering=dynamic_filtering,
            n_samples_per_prompt=4,
            max_len=2048,
        )
        return samples, consumed, exhausted

    def experiences(self, samples: list[Any]) -> tuple[list[Any], list[Any]]:
        """The maker's batches of ``samples`` (``Experience.concat_experiences``, 4 a batch),
        and those batches with their advantages and returns."""
        batch = self.maker.split_rollout_samples(samples)
        for experience in batch:  # make_experience's forward passes (GPU models): KL zero
            experience.kl = experience.action_mask.float() * 0
        return batch, self.maker.compute_advantages_and_returns(batch)

    def index(self, samples: list[Any]) -> list[int]:
        """Each sample's group, by its prompt."""
        return [self.prompts.index(e.prompts[0]) for e in samples]


def op_filter(request: dict[str, Any], tokenizer: Any) -> dict[str, Any]:
    groups = Groups(request["url"], request["groups"], tokenizer)
    kept, consumed, exhausted = groups.generate(dynamic_filtering=True)
    batch, experiences = groups.experiences(kept)
    return {
        "consumed": consumed,
        "exhausted": exhausted,
        "kept": groups.index(kept),
        "rewards": [e.rewards.flatten().tolist() for e in kept],
        "scores": [e.scores.flatten().tolist() for e in kept],
        "correct": [e.info["correct"].flatten().tolist() for e in kept],
        "batches": [len(b.sequences) for b in batch],
        "highest": [a for e in experiences for a in e.advantages.max(dim=1).values.tolist()],
        "lowest": [a for e in experiences for a in e.advantages.min(dim=1).values.tolist()],
        "group_std": experiences[0].info["group_reward_std"].tolist(),
    }


def op_failed_group(request: dict[str, Any], tokenizer: Any) -> dict[str, Any]:
    groups = Groups(request["url"], request["groups"], tokenizer)
    samples, consumed, _ = groups.generate(dynamic_filtering=False)
    _, experiences = groups.experiences(samples)
    items = [item for e in experiences for item in split_experience_batch(e)]
    answer = {
        "consumed": consumed,
        "rewards": [e.rewards.item() for e in samples],
        "failed": [e.info["failed"].item() for e in samples],
        "split_failed": [item.info["failed"].item() for item in items],
        "advantages": [e.advantages.flatten().tolist() for e in experiences],
    }
    kept, _, _ = groups.generate(dynamic_filtering=True)
    answer["kept"] = groups.index(kept)
    # One sample's logs without a key the others have.
    del samples[5].info["failed"]
    [_, broken] = groups.maker.split_rollout_samples(samples)
    try:
        split_experience_batch(broken)
        answer["split_error"] = None
    except Exception as exc:
        answer["split_error"] = {"type": type(exc).__name__, "message": str(exc)}
    return answer


def op_none_reward(request: dict[str, Any], tokenizer: Any) -> dict[str, Any]:
    llm, prompts = scripted(tokenizer, {request["question"]: [request["response"]]})
    prompt = prompts[request["question"]]
    answer = execute(rollout_actor(request["url"], llm), tokenizer, prompt, "", 2048, None)
    experience = SamplesGenerator._process_response_into_experience(None, answer)
    maker = RemoteExperienceMaker.__new__(RemoteExperienceMaker)
    maker.strategy = types.SimpleNamespace(args=types.SimpleNamespace())
    try:
        maker.compute_advantages_and_returns([experience])
        error = None
    except Exception as exc:
        error = {"type": type(exc).__name__, "message": str(exc)}
    return {
        "reward": answer["reward"],
        "rewards": experience.rewards,
        "scores": experience.scores,
        "advantages_error": error,
    }


def op_train_ppo_ray(request: dict[str, Any], tokenizer: Any) -> str:
    spec = importlib.util.find_spec("openrlhf")
    assert spec is not None and spec.origin is not None
    return (Path(spec.origin).parent / "cli" / "train_ppo_ray.py").read_text()


OPS = {
    "execute": op_execute,
    "filter": op_filter,
    "failed_group": op_failed_group,
    "none_reward": op_none_reward,
    "train_ppo_ray": op_train_ppo_ray,
}


def main() -> None:
    tokenizer = None
    for line in sys.stdin:
        request = json.loads(line)
        try:
            if request["op"] == "tokenizer":
                tokenizer = make_tokenizer(request["corpus"])
                answer: Any = None
            else:
                answer = OPS[request["op"]](request, tokenizer)
        except Exception as exc:
            answer = {"error": {"type": type(exc).__name__, "message": str(exc)}}
        ANSWERS.write(json.dumps(answer) + "\n")
        ANSWERS.flush()
    REFS.loop.close()


if __name__ == "__main__":
    main()
