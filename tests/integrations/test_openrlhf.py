"""OpenRLHF 0.11.2's own remote-reward path against a running gateway.

What runs is OpenRLHF's released code (``openrlhf==0.11.2``, requirements/trainers-nodeps.txt):
``SingleTurnAgentExecutor`` (openrlhf/utils/agent.py) tokenizes the templated prompt, decodes
prompt + response with ``skip_special_tokens=False`` and posts ``{"query", "prompts",
"labels"}``; ``RolloutRayActor.generate_responses`` runs it ``n_samples_per_prompt`` times;
``SamplesGenerator._generate_vllm`` turns the answers into ``Experience`` objects and applies
dynamic filtering; ``RemoteExperienceMaker`` concatenates them and computes group-normalised
advantages. The prompts are built by its ``preprocess_data`` with a tokenizer made here (a
byte-level BPE trained on a few GSM8K lines, ChatML template, EOS ``<|im_end|>``: no hub
download), so a finished response's query ends in its EOS as in training.

Stood in for, because they cannot run here (no GPU): ``vllm`` is a module of names, and the
engine's ``llm.generate`` replays scripted token ids; ``ray`` is a module of names whose
remote calls run in place (``ray.get`` / ``ray.wait`` on values already computed);
``flash_attn`` (CUDA kernels, imported by OpenRLHF's model modules) is names only. The actor
and reference forward passes (models on GPUs behind ray) are not run: the KL they would give
is set to zero, as OpenRLHF sets it without a reference model. Real processes: math and the
gateway on the embedded queue.
"""

from __future__ import annotations

import asyncio
import importlib.machinery
import inspect
import json
import re
import sys
import types
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import DATA, ROOT, RunningService, need_data

pytestmark = [
    pytest.mark.e2e,
    # OpenRLHF's model utilities are @torch.compile'd at import, which loads torch's inductor.
    pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated"),
]

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


@pytest.fixture(scope="module")
def openrlhf() -> Iterator[types.SimpleNamespace]:
    """OpenRLHF's modules, imported with ray, vllm and flash_attn stood in for by name (and
    those names taken out of ``sys.modules`` afterwards)."""
    refs = _Refs()
    stubs = {
        "ray": _module("ray", remote=refs.remote, get=refs.get, wait=refs.wait, put=refs.get),
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
    before = set(sys.modules)
    sys.modules.update(stubs)
    try:
        from openrlhf.datasets.prompts_dataset import preprocess_data
        from openrlhf.trainer.ppo_utils.experience import split_experience_batch
        from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker
        from openrlhf.trainer.ppo_utils.kl_controller import FixedKLController
        from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator
        from openrlhf.trainer.ray.vllm_engine import RolloutRayActor
        from openrlhf.utils.agent import SingleTurnAgentExecutor

        yield types.SimpleNamespace(
            refs=refs,
            preprocess_data=preprocess_data,
            RemoteExperienceMaker=RemoteExperienceMaker,
            FixedKLController=FixedKLController,
            SamplesGenerator=SamplesGenerator,
            RolloutRayActor=RolloutRayActor,
            SingleTurnAgentExecutor=SingleTurnAgentExecutor,
            split_experience_batch=split_experience_batch,
        )
    finally:
        refs.loop.close()
        for name in set(sys.modules) - before:
            if name.split(".")[0] in {"ray", "vllm", "flash_attn", "openrlhf"}:
                del sys.modules[name]
        for name in stubs:
            sys.modules.pop(name, None)


def gsm8k(count: int) -> list[dict[str, str]]:
    """The first ``count`` GSM8K test rows: question, gold solution, a wrong one, the label."""
    rows = []
    path = need_data(DATA / "math" / "gsm8k_test.jsonl")
    for line in path.read_text().splitlines()[:count]:
        row = json.loads(line)
        label = row["answer"].rsplit("####", 1)[1].strip().replace(",", "")
        wrong = re.sub(r"#### .*$", f"#### {int(label) + 1}", row["answer"])
        rows.append({"question": row["question"], "gold": row["answer"], "wrong": wrong})
        rows[-1]["label"] = label
    return rows


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    """A byte-level BPE tokenizer built here (exact round trip), ChatML, EOS ``<|im_end|>``."""
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
    corpus = [row["gold"] + row["question"] for row in gsm8k(20)]
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


def rollout_actor(openrlhf: Any, url: str, llm: ScriptedLLM) -> Any:
    """OpenRLHF's ``RolloutRayActor`` with its vLLM engine stood in for (its ``__init__``
    starts vLLM on a GPU, so the two fields it sets are set here)."""
    actor = object.__new__(openrlhf.RolloutRayActor)
    actor.executor = openrlhf.SingleTurnAgentExecutor(url)
    actor.llm = llm
    actor._mm_pad_token_ids = set()
    return actor


def prompt_of(openrlhf: Any, tokenizer: Any, question: str, label: str) -> tuple[str, str]:
    """OpenRLHF's dataset preprocessing (``--data.apply_chat_template``)."""
    data = {"question": question, "answer": label}
    prompt, label = openrlhf.preprocess_data(
        data,
        input_key="question",
        label_key="answer",
        apply_chat_template=tokenizer.apply_chat_template,
    )
    return prompt, label


def execute(
    openrlhf: Any,
    actor: Any,
    tokenizer: Any,
    prompt: str,
    label: Any,
    max_length: int = 2048,
    max_tokens: int | None = None,
) -> dict[str, Any]:
    """One sample through ``SingleTurnAgentExecutor.execute``, as a rollout worker runs it
    (``--max_len`` and ``--max_new_tokens``: OpenRLHF keeps a prompt's last ``max_length -
    max_tokens`` tokens)."""
    params = _SamplingParams(max_tokens=max_tokens, logprobs=None)
    coroutine = actor.executor.execute(prompt, label, params, max_length, tokenizer, actor)
    answer: dict[str, Any] = openrlhf.refs.loop.run_until_complete(coroutine)
    return answer


@pytest.fixture
def gateway(service: Callable[..., RunningService]) -> Callable[..., RunningService]:
    def start(**env: str) -> RunningService:
        memory = {"TRIBUNAL_QUEUE": "memory", "TRIBUNAL_MATH_PROCESSES": "1", **env}
        math = service("math", env=memory)
        return service("gateway", env={**memory, "TRIBUNAL_GATEWAY_MATH_URL": math.base_url})

    return start


def test_gsm8k_gold_is_paid_and_wrong_is_not_through_openrlhfs_executor(
    openrlhf: Any, tokenizer: Any, gateway: Callable[..., RunningService]
) -> None:
    rows = gsm8k(12)
    url = f"{gateway().base_url}/get_reward/rloo_math"
    prompts = {
        r["question"]: prompt_of(openrlhf, tokenizer, r["question"], r["label"]) for r in rows
    }
    script = {prompts[r["question"]][0]: [r["gold"], r["wrong"]] for r in rows}
    actor = rollout_actor(openrlhf, url, ScriptedLLM(tokenizer, script))
    paid = []
    for row in rows:
        prompt, label = prompts[row["question"]]
        gold = execute(openrlhf, actor, tokenizer, prompt, label)
        wrong = execute(openrlhf, actor, tokenizer, prompt, label)
        query = tokenizer.decode(gold["observation_tokens"], skip_special_tokens=False)
        assert query.startswith(prompt) and query.endswith(row["gold"] + EOS)  # as sent
        paid.append((gold["reward"], wrong["reward"], gold["scores"], wrong["scores"]))
        assert gold["extra_logs"] == {"math": [1.0], "undecided": [0.0], "failed": [0.0]}
    assert paid == [([1.0], [0.0], [1.0], [0.0])] * len(rows)


def test_a_prompt_openrlhf_truncates_is_scored_counted_and_logged_once(
    openrlhf: Any, tokenizer: Any, gateway: Callable[..., RunningService]
) -> None:
    rows = gsm8k(3)
    running = gateway()
    url = f"{running.base_url}/get_reward/rloo_math"
    prompts = {
        r["question"]: prompt_of(openrlhf, tokenizer, r["question"], r["label"]) for r in rows
    }
    script = {prompts[r["question"]][0]: [r["gold"], r["wrong"]] for r in rows}
    actor = rollout_actor(openrlhf, url, ScriptedLLM(tokenizer, script))
    paid = []
    for row in rows:
        prompt, label = prompts[row["question"]]
        # --max_len leaves room for all of the prompt but its first 12 tokens.
        kept = len(tokenizer(text=prompt, add_special_tokens=False)["input_ids"]) - 12
        gold, wrong = (
            execute(openrlhf, actor, tokenizer, prompt, label, kept + 256, 256) for _ in range(2)
        )
        query = tokenizer.decode(gold["observation_tokens"], skip_special_tokens=False)
        assert not query.startswith(prompt) and query.endswith(row["gold"] + EOS)  # as sent
        paid.append((gold["reward"], wrong["reward"]))
    assert paid == [([1.0], [0.0])] * len(rows)
    metrics = httpx.get(f"{running.base_url}/metrics").text
    line = 'tribunal_trainer_prompts_truncated_total{route="openrlhf",spec="rloo_math"}'
    assert f"{line} 6.0" in metrics
    log = running.logs["api"].read_text()
    assert log.count("start inside their prompt") == 1  # six samples, one line per minute


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


def test_a_tcr_agent_group_survives_dynamic_filtering_and_gets_advantages(
    openrlhf: Any, tokenizer: Any, gateway: Callable[..., RunningService]
) -> None:
    # tcr_agent pays +1 / -1: only scores (correctness) in [0, 1] let a mixed group through
    # OpenRLHF's filter, which keeps a group whose mean score lies strictly in (0, 1).
    rows = gsm8k(4)
    url = f"{gateway().base_url}/get_reward/tcr_agent"
    mixes = [(2, 2), (4, 0), (0, 4), (1, 3)]  # (gold, wrong) per prompt, four samples each
    prompts, labels, script = [], [], {}
    for row, (gold, wrong) in zip(rows, mixes, strict=True):
        prompt, label = prompt_of(openrlhf, tokenizer, row["question"], row["label"])
        prompts.append(prompt)
        labels.append(label)
        script[prompt] = [row["gold"]] * gold + [row["wrong"]] * wrong
    actor = rollout_actor(openrlhf, url, ScriptedLLM(tokenizer, script))
    strategy = ppo_strategy()
    engine = openrlhf.refs.handle(actor)
    generator = openrlhf.SamplesGenerator(strategy, None, None, tokenizer, [engine])
    batches = iter([(None, prompts, labels, [None] * len(prompts))])
    kept, consumed, exhausted = generator._generate_vllm(
        batches, num_prompts=4, dynamic_filtering=True, n_samples_per_prompt=4, max_len=2048
    )
    assert consumed == 4 and exhausted
    assert [e.prompts[0] for e in kept] == [prompts[0]] * 4 + [prompts[3]] * 4
    rewards = [e.rewards.flatten().tolist() for e in kept]
    assert rewards == [[1.0]] * 2 + [[-1.0]] * 2 + [[1.0]] + [[-1.0]] * 3
    assert [e.scores.flatten().tolist() for e in kept] == [[(r[0] + 1) / 2] for r in rewards]
    assert [e.info["correct"].flatten().tolist() for e in kept] == [
        [(r[0] + 1) / 2] for r in rewards
    ]

    maker = openrlhf.RemoteExperienceMaker(
        None, None, None, None, openrlhf.FixedKLController(0.0), strategy, tokenizer
    )
    batch = maker.split_rollout_samples(kept)  # Experience.concat_experiences, 4 a batch
    assert [len(b.sequences) for b in batch] == [4, 4]
    for experience in batch:  # make_experience's forward passes (GPU models): KL zero
        experience.kl = experience.action_mask.float() * 0
    experiences = maker.compute_advantages_and_returns(batch)
    advantages = [a for e in experiences for a in e.advantages.max(dim=1).values.tolist()]
    lowest = [a for e in experiences for a in e.advantages.min(dim=1).values.tolist()]
    signs = [1 if a > 0 else -1 for a in (advantages[:2] + lowest[2:4] + advantages[4:5])]
    assert signs == [1, 1, -1, -1, 1] and all(a < 0 for a in lowest[5:])
    group_std = experiences[0].info["group_reward_std"].tolist()
    assert group_std == pytest.approx([2 / 3**0.5] * 4)  # std of (1, 1, -1, -1), unbiased


def metric(base_url: str, route: str, spec: str, code: str, name: str = "samples_refused") -> float:
    text = httpx.get(f"{base_url}/metrics").text
    pattern = (
        rf'tribunal_trainer_{name}_total\{{code="{code}",route="{route}",'
        rf'spec="{spec}"\}} ([0-9.]+)'
    )
    found = re.search(pattern, text)
    return float(found[1]) if found else 0.0


def test_a_group_with_failed_samples_trains_and_the_rest_is_scored(
    openrlhf: Any, tokenizer: Any, gateway: Callable[..., RunningService]
) -> None:
    # Two prompts of four samples each: one with its label, one with an empty label (what
    # OpenRLHF sends without --data.label_key). Each sample is one request, as in training.
    first, second = gsm8k(2)
    running = gateway()
    url = f"{running.base_url}/get_reward/rloo_math"
    good, _ = prompt_of(openrlhf, tokenizer, first["question"], first["label"])
    bad, _ = prompt_of(openrlhf, tokenizer, second["question"], second["label"])
    script = {good: [first["gold"], first["wrong"]] * 4, bad: [second["gold"]] * 8}
    actor = rollout_actor(openrlhf, url, ScriptedLLM(tokenizer, script))
    strategy = ppo_strategy()
    generator = openrlhf.SamplesGenerator(
        strategy, None, None, tokenizer, [openrlhf.refs.handle(actor)]
    )
    batches = iter([(None, [good, bad], [first["label"], ""], [None, None])])
    samples, consumed, _ = generator._generate_vllm(
        batches, num_prompts=2, dynamic_filtering=False, n_samples_per_prompt=4, max_len=2048
    )
    assert consumed == 2 and len(samples) == 8
    # The good prompt's samples are scored; the bad one's get rloo_math's failed reward (its
    # undecided_reward, 0, its lowest), a score of 0 and a 1 in info["failed"].
    assert [e.rewards.item() for e in samples] == [1.0, 0.0] * 2 + [0.0] * 4
    assert [e.info["failed"].item() for e in samples] == [0.0] * 4 + [1.0] * 4
    assert metric(running.base_url, "openrlhf", "rloo_math", "bad_input", "items_failed") == 4
    log = running.log_text()
    assert log.count("openrlhf item 0 failed (bad_input), given the spec's failed reward 0") == 4
    assert 'labels.0: \'labels.0: the label is ""; set --data.label_key' in log

    # OpenRLHF's experience making and its replay buffer's split take the batch: every
    # sample's logs have the same keys.
    maker = openrlhf.RemoteExperienceMaker(
        None, None, None, None, openrlhf.FixedKLController(0.0), strategy, tokenizer
    )
    batch = maker.split_rollout_samples(samples)
    for experience in batch:
        experience.kl = experience.action_mask.float() * 0
    experiences = maker.compute_advantages_and_returns(batch)
    items = [item for e in experiences for item in openrlhf.split_experience_batch(e)]
    assert [item.info["failed"].item() for item in items] == [0.0] * 4 + [1.0] * 4
    # A failed group has no spread: every advantage 0, nothing learnt from it.
    assert all(a == 0 for e in experiences[1:] for a in e.advantages.flatten().tolist())
    assert any(a > 0 for a in experiences[0].advantages.flatten().tolist())
    # With dynamic filtering on, the failed group's mean score, 0, drops it.
    batches = iter([(None, [good, bad], [first["label"], ""], [None, None])])
    kept, _, _ = generator._generate_vllm(
        batches, num_prompts=2, dynamic_filtering=True, n_samples_per_prompt=4, max_len=2048
    )
    assert [e.prompts[0] for e in kept] == [good] * 4
    # Were a key missing from one sample's logs (as when only some items carry it), the
    # replay buffer's split would refuse the whole batch.
    del samples[5].info["failed"]
    [_, broken] = maker.split_rollout_samples(samples)
    with pytest.raises(ValueError, match=r"Size of info\[failed\] \(3\)"):
        openrlhf.split_experience_batch(broken)


def test_what_openrlhf_does_with_a_refused_sample_a_verifier_down_and_the_gateway_down(
    openrlhf: Any, tokenizer: Any, service: Callable[..., RunningService]
) -> None:
    [row] = gsm8k(1)
    memory = {"TRIBUNAL_QUEUE": "memory", "TRIBUNAL_MATH_PROCESSES": "1"}
    math = service("math", env=memory)
    env = {**memory, "TRIBUNAL_GATEWAY_MATH_URL": math.base_url, "TRIBUNAL_GATEWAY_RETRIES": "0"}
    running = service("gateway", env=env)
    prompt, _ = prompt_of(openrlhf, tokenizer, row["question"], row["label"])
    script = {prompt: [row["gold"]] * 4}
    llm = ScriptedLLM(tokenizer, script)
    # An unknown spec is the request's error (422): OpenRLHF, after its five tries 1 s apart,
    # logs at INFO and keeps the sample with a reward of None. Counted under "unknown",
    # whatever name was sent.
    actor = rollout_actor(openrlhf, f"{running.base_url}/get_reward/no_such_spec", llm)
    refused = execute(openrlhf, actor, tokenizer, prompt, row["label"])
    assert (refused["reward"], refused["scores"], refused["extra_logs"]) == (None, None, {})
    assert metric(running.base_url, "openrlhf", "unknown", "bad_input") == 5.0
    log = running.log_text()
    assert "openrlhf sample refused (bad_input, HTTP 422): spec 'no_such_spec', prompt '" in log
    # The math service down behind the gateway: 503, the same None, counted by its class.
    math.stop()
    actor = rollout_actor(openrlhf, f"{running.base_url}/get_reward/rloo_math", llm)
    assert execute(openrlhf, actor, tokenizer, prompt, row["label"])["reward"] is None
    assert metric(running.base_url, "openrlhf", "rloo_math", "backend_unavailable") == 5.0
    assert "openrlhf sample refused (backend_unavailable, HTTP 503)" in running.log_text()
    # The gateway down: the same None, after the same five tries.
    actor = rollout_actor(openrlhf, "http://127.0.0.1:9/get_reward/rloo_math", llm)
    assert execute(openrlhf, actor, tokenizer, prompt, row["label"])["reward"] is None
    # What a None reward does in OpenRLHF's experience making: it trains on nothing and
    # fails later, far from the cause.
    experience = openrlhf.SamplesGenerator._process_response_into_experience(None, refused)
    assert experience.rewards is None and experience.scores is None
    with pytest.raises(AttributeError, match="'NoneType' object has no attribute 'to'"):
        maker = openrlhf.RemoteExperienceMaker.__new__(openrlhf.RemoteExperienceMaker)
        maker.strategy = types.SimpleNamespace(args=types.SimpleNamespace())
        maker.compute_advantages_and_returns([experience])


def test_with_an_api_key_openrlhf_gets_in_by_basic_credentials_or_the_key_path(
    openrlhf: Any, tokenizer: Any, gateway: Callable[..., RunningService]
) -> None:
    # OpenRLHF's client posts to a bare URL with no header; aiohttp sends a URL's user
    # information as Basic credentials, and /k/<key>/ carries the key in the path.
    key = "k3y-for-openrlhf"
    running = gateway(TRIBUNAL_API_KEY=key)
    [row] = gsm8k(1)
    prompt, label = prompt_of(openrlhf, tokenizer, row["question"], row["label"])
    host = running.base_url.removeprefix("http://")
    urls = [
        f"http://openrlhf:{key}@{host}/get_reward/rloo_math",
        f"{running.base_url}/k/{key}/get_reward/rloo_math",
        f"{running.base_url}/get_reward/rloo_math",  # no key: 401, then a reward of None
    ]
    llm = ScriptedLLM(tokenizer, {prompt: [row["gold"]] * len(urls)})
    rewards = [
        execute(openrlhf, rollout_actor(openrlhf, url, llm), tokenizer, prompt, label)["reward"]
        for url in urls
    ]
    assert rewards == [[1.0], [1.0], None]
    body = {"query": [prompt + "#### 18"], "prompts": [prompt], "labels": ["18"]}
    for url in (f"/k/{key}x/get_reward/rloo_math", "/k//get_reward/rloo_math"):
        assert httpx.post(running.base_url + url, json=body).status_code in (401, 404)
    wrong = httpx.post(f"{running.base_url}/k/{key[:-1]}/get_reward/rloo_math", json=body)
    assert wrong.status_code == 401 and key not in wrong.text


def test_the_documented_flags_are_openrlhf_0_11s_own() -> None:
    # docs/integrations.md's training command, each flag looked up in OpenRLHF 0.11.2's
    # train_ppo_ray.py (its parser is built under __main__, so its source is read).
    import importlib.util

    from tests.e2e.test_readme import sh_blocks

    [block] = [
        b for b in sh_blocks(ROOT / "docs" / "integrations.md") if "openrlhf.cli.train_ppo_ray" in b
    ]
    flags = re.findall(r"(--[a-z_.]+)", block)
    assert {"--reward.remote_url", "--data.label_key", "--algo.dynamic_filtering_enable"} <= set(
        flags
    )
    spec = importlib.util.find_spec("openrlhf")
    assert spec is not None and spec.origin is not None
    source = (Path(spec.origin).parent / "cli" / "train_ppo_ray.py").read_text()
    assert [f for f in flags if f'"{f}"' not in source] == []
    assert '"--remote_rm_url"' not in source  # the pre-0.11 name is gone
