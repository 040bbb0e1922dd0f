"""verl 0.9.1's own code against Tribunal: its Hydra config, its reward-function loader, its
reward-loop worker with the ``naive`` and ``dapo`` managers over a ``DataProto`` of rollouts
(GSM8K, MATH-500, stdio code), and its ``sandbox_fusion`` utilities against the code service.

verl is installed without its dependencies (requirements/trainers-nodeps.txt) plus what these
modules import. Not run here: Ray's actor pool (``RewardLoopManager`` spreads batches over
``RewardLoopWorker`` actors; the worker itself runs here in-process, the manager's merge of
the workers' outputs is repeated below as verl writes it) and vLLM (the rollouts are token ids
built by the test with a byte-level tokenizer trained on the spot, no hub download).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import shlex
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import DATA, ROOT, RedisServer, RunningService, need_data, redis_env
from tribunal.client import ClientError
from tribunal.integrations import verl as tribunal_verl
from tribunal.integrations.verl import RewardUnavailable, compute_score, compute_score_sync

verl = pytest.importorskip("verl", reason="verl is installed from requirements/trainers-nodeps.txt")
hydra = pytest.importorskip("hydra")
torch = pytest.importorskip("torch")

from hydra import compose, initialize_config_dir  # noqa: E402
from verl import DataProto  # noqa: E402

with warnings.catch_warnings():
    # verl 0.9.1 imports Ray's state API from its old place (a DeprecationWarning in Ray 2.60).
    warnings.simplefilter("ignore", DeprecationWarning)
    from verl.experimental.reward_loop import RewardLoopWorker, migrate_legacy_reward_impl
from verl.trainer.ppo.reward import get_custom_reward_fn, load_reward_manager  # noqa: E402

pytestmark = pytest.mark.e2e

VERL_CONFIG = Path(verl.__file__).parent / "trainer" / "config"
ASYNC_CONFIG = Path(verl.__file__).parent / "experimental" / "fully_async_policy" / "config"


def documented_overrides() -> list[str]:
    """The ``key=value`` arguments of docs/integrations.md's ``main_ppo`` command."""
    page = (ROOT / "docs" / "integrations.md").read_text()
    [block] = [b for b in re.findall(r"```sh\n(.*?)```", page, re.S) if "main_ppo" in b]
    return [arg for arg in shlex.split(block.replace("\\\n", " ")) if "=" in arg]


def overrides(url: str, *extra: str) -> list[str]:
    """The documented overrides, the gateway's URL swapped in."""
    return [
        re.sub(r"url=.*", f"url={url}", arg) if "reward_kwargs.url=" in arg else arg
        for arg in documented_overrides()
    ] + list(extra)


def ppo_config(args: list[str], tokenizer_dir: Path | None = None) -> Any:
    """verl's ``ppo_trainer.yaml`` composed with ``args`` as ``main_ppo`` composes it."""
    model = [f"actor_rollout_ref.model.path={tokenizer_dir}"] if tokenizer_dir else []
    with initialize_config_dir(config_dir=str(VERL_CONFIG), version_base=None):
        return compose("ppo_trainer", overrides=args + model)


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A byte-level BPE trained on the spot, Qwen's end and padding tokens, saved as verl's
    worker loads a tokenizer (``hf_tokenizer`` of a local path)."""
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    bpe = Tokenizer(models.BPE(unk_token=None))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|endoftext|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator(["Janet sells 16 - 3 - 4 = 9 duck eggs. #### 18 \\boxed{}"], trainer)
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    out = tmp_path_factory.mktemp("tokenizer")
    tokenizer.save_pretrained(out)
    return out


# Rollouts: (data_source, prompt, response, ground_truth, extra_info).
Rollout = tuple[str, str, str, Any, dict[str, Any]]


def math_rollouts() -> list[Rollout]:
    """GSM8K gold solutions and the same with the final answer changed (verl's gsm8k
    preprocessing keeps the text after ``####`` as ground_truth), and MATH-500 solutions."""
    rows: list[Rollout] = []
    lines = need_data(DATA / "math" / "gsm8k_test.jsonl").read_text().splitlines()[:3]
    for line in lines:
        row = json.loads(line)
        answer = row["answer"].split("####")[-1].strip()
        rows.append(("openai/gsm8k", row["question"], row["answer"], answer, {"split": "test"}))
        wrong = row["answer"].rsplit("####", 1)[0] + f"#### {int(answer) + 1}"
        rows.append(("openai/gsm8k", row["question"], wrong, answer, {"split": "test"}))
    lines = need_data(DATA / "math" / "math500_test.jsonl").read_text().splitlines()[:2]
    for line in lines:
        row = json.loads(line)
        rows.append(("HuggingFaceH4/MATH-500", row["problem"], row["solution"], row["answer"], {}))
    return rows


# A codecontests-style stdio problem (verl's code datasets carry such cases as
# ``{"inputs", "outputs"}``): the shared data's code sets are function and assert tests.
SUM_TESTS = {"inputs": ["1 2\n", "40 2\n", "-5 5\n"], "outputs": ["3\n", "42\n", "0\n"]}
RIGHT_PROGRAM = "Read two integers:\n```python\na, b = map(int, input().split())\nprint(a + b)\n```"
WRONG_PROGRAM = "```python\na, b = map(int, input().split())\nprint(a * b)\n```"


def code_rollouts() -> list[Rollout]:
    """One right and one wrong program; the tests as a dict and as its JSON string."""
    prompt = "Print the sum of the two integers on stdin."
    return [
        ("codecontests", prompt, RIGHT_PROGRAM, SUM_TESTS, {}),
        ("taco", prompt, WRONG_PROGRAM, json.dumps(SUM_TESTS), {}),
    ]


def data_proto(tokenizer: Any, rollouts: list[Rollout], num_turns: int | None = None) -> Any:
    """A ``DataProto`` as verl's agent loop hands it to the reward loop: left-padded prompt
    ids, right-padded response ids ending in the EOS token, one attention mask over both."""
    prompts = [tokenizer.encode(r[1], add_special_tokens=False) for r in rollouts]
    responses = [
        [*tokenizer.encode(r[2], add_special_tokens=False), tokenizer.eos_token_id]
        for r in rollouts
    ]
    p_len, r_len = max(map(len, prompts)), max(map(len, responses))
    pad = tokenizer.pad_token_id
    prompt_ids = torch.tensor([[pad] * (p_len - len(p)) + p for p in prompts])
    response_ids = torch.tensor([r + [pad] * (r_len - len(r)) for r in responses])
    mask = torch.tensor(
        [
            [0] * (p_len - len(p)) + [1] * len(p) + [1] * len(r) + [0] * (r_len - len(r))
            for p, r in zip(prompts, responses, strict=True)
        ]
    )
    non_tensors: dict[str, Any] = {
        "data_source": np.array([r[0] for r in rollouts], dtype=object),
        "reward_model": np.array([{"ground_truth": r[3]} for r in rollouts], dtype=object),
        "extra_info": np.array([dict(r[4]) for r in rollouts], dtype=object),
    }
    if num_turns is not None:
        non_tensors["__num_turns__"] = np.array([num_turns] * len(rollouts), dtype=np.int32)
    return DataProto.from_dict(
        tensors={
            "prompts": prompt_ids,
            "responses": response_ids,
            "input_ids": torch.cat([prompt_ids, response_ids], dim=1),
            "attention_mask": mask,
        },
        non_tensors=non_tensors,
    )


def close_thread_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Close the event loop verl set for this thread."""
    asyncio.set_event_loop(None)
    loop.close()


def reward_loop(config: Any, proto: Any) -> tuple[list[dict[str, Any]], Any, dict[str, Any]]:
    """verl's ``RewardLoopWorker`` over ``proto``, then ``RewardLoopManager.compute_rm_score``'s
    merge as verl 0.9.1 writes it (the first sample's keys for all; the scores assembled by
    the manager class): (outputs, rm_scores, extra infos by key)."""
    worker = RewardLoopWorker(config)
    # The worker and its manager take the thread's event loop when built (as in a Ray actor)
    # and schedule on it: run on that one.
    try:
        outputs = worker.loop.run_until_complete(worker.compute_score_batch(proto))
    finally:
        close_thread_loop(worker.loop)
    rm_scores = worker.reward_manager.assemble_rm_scores(
        proto, [out["reward_score"] for out in outputs]
    )
    infos = [out.get("reward_extra_info", {}) for out in outputs]
    merged = {key: np.array([info[key] for info in infos]) for key in infos[0]}
    return outputs, rm_scores, merged


@pytest.fixture
def stack(
    service: Callable[..., RunningService], redis_server: RedisServer, key_prefix: str
) -> str:
    """A gateway with the math and code services; its URL."""
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap not installed (the code sandbox)")
    env = redis_env(redis_server, key_prefix, TRIBUNAL_MATH_PROCESSES="1", TRIBUNAL_CODE_SLOTS="2")
    math_service = service("math", env=env)
    code = service("code", env=env)
    gateway = service(
        "gateway",
        env={
            **env,
            "TRIBUNAL_GATEWAY_MATH_URL": math_service.base_url,
            "TRIBUNAL_GATEWAY_CODE_URL": code.base_url,
        },
    )
    return gateway.base_url


def test_the_documented_config_is_what_verl_loads(tokenizer_dir: Path) -> None:
    config = ppo_config(overrides("http://127.0.0.1:8100"), tokenizer_dir)
    loaded = get_custom_reward_fn(config)
    assert loaded is not None
    # verl wraps the function in a partial with reward_kwargs; it awaits a coroutine function.
    assert loaded.args[0] is tribunal_verl.compute_score
    assert loaded.args[1] == {"url": "http://127.0.0.1:8100"}
    manager = load_reward_manager(config, tokenizer=None)
    close_thread_loop(manager.loop)
    assert type(manager).__name__ == "NaiveRewardManager" and manager.is_async_reward_score
    # The fully-async entry point composes its own yaml over ppo_trainer and migrates.
    with initialize_config_dir(config_dir=str(ASYNC_CONFIG), version_base=None):
        async_config = compose(
            "fully_async_ppo_trainer", overrides=overrides("http://127.0.0.1:8100")
        )
    assert get_custom_reward_fn(migrate_legacy_reward_impl(async_config)).args[0] is (
        tribunal_verl.compute_score
    )


def test_the_old_top_level_key_composes_but_main_ppo_ignores_it() -> None:
    # What the README said before verl 0.9: it composes without a word, and main_ppo's
    # reward loop finds no custom function (verl's own default_compute_score would run).
    old = [
        "custom_reward_function.path=pkg://tribunal.integrations.verl",
        "custom_reward_function.name=compute_score",
    ]
    assert get_custom_reward_fn(ppo_config(old)) is None


def test_naive_manager_routes_by_data_source(stack: str, tokenizer_dir: Path) -> None:
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(tokenizer_dir)
    rollouts = math_rollouts() + code_rollouts()
    config = ppo_config(overrides(stack), tokenizer_dir)
    outputs, rm_scores, merged = reward_loop(config, data_proto(tokenizer, rollouts))
    scores = [out["reward_score"] for out in outputs]
    # GSM8K gold, GSM8K wrong (x3), MATH-500 solutions, right and wrong program.
    assert scores == [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0]
    # The reward sits on each response's last real token (its EOS), as verl places it.
    assert rm_scores.sum(dim=1).tolist() == scores
    assert set(merged) == {"score", "math", "code"}
    assert np.isnan(merged["code"][:8]).all() and merged["math"][:8].tolist() == scores[:8]
    assert np.isnan(merged["math"][8:]).all() and merged["code"][8:].tolist() == [1.0, 0.0]


def test_dapo_manager_with_a_spec_and_turns(stack: str, tokenizer_dir: Path) -> None:
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(tokenizer_dir)
    rollouts = math_rollouts()[:2] + code_rollouts()
    config = ppo_config(
        overrides(
            stack,
            "reward.reward_manager.name=dapo",
            "+reward.custom_reward_function.reward_kwargs.spec=tcr_agent",
        ),
        tokenizer_dir,
    )
    outputs, _, merged = reward_loop(config, data_proto(tokenizer, rollouts, num_turns=6))
    # dapo's manager passes no num_turns (naive's does): tcr_agent counts none, 2 turns.
    assert [out["reward_score"] for out in outputs] == [1.0, -1.0, 1.0, -1.0]
    assert set(merged) == {"score", "correct", "num_turns", "overlong"}
    naive = ppo_config(
        overrides(stack, "+reward.custom_reward_function.reward_kwargs.spec=tcr_agent"),
        tokenizer_dir,
    )
    outputs, _, merged = reward_loop(naive, data_proto(tokenizer, rollouts, num_turns=6))
    # naive's passes the agent loop's 6 turns: a wrong answer is punished less.
    assert [out["reward_score"] for out in outputs] == pytest.approx([1.0, -0.8, 1.0, -0.8])
    assert merged["num_turns"].tolist() == [6.0] * 4


def test_what_a_verl_user_sees_on_errors(stack: str, tokenizer_dir: Path) -> None:
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(tokenizer_dir)
    config = ppo_config(overrides(stack), tokenizer_dir)
    # A refused item (no ground truth): the reward loop raises with the gateway's reason.
    refused = [("openai/gsm8k", "q", "#### 18", None, {})]
    with pytest.raises(RewardUnavailable, match=r"bad_input \(ground_truth\)"):
        reward_loop(config, data_proto(tokenizer, refused))
    # An item nothing can score: a data_source with no verifier and no spec.
    unscorable = [("searchR1_nq", "q", "Paris", "Paris", {})]
    with pytest.raises(ValueError, match="data_source 'searchR1_nq' names no verifier"):
        reward_loop(config, data_proto(tokenizer, unscorable))
    call_based = {"inputs": [[1, 2]], "outputs": [3], "fn_name": "add"}
    with pytest.raises(ValueError, match="fn_name='add'"):
        asyncio.run(compute_score("apps", RIGHT_PROGRAM, call_based, {}, url=stack))
    with pytest.raises(TypeError, match="unknown reward_kwargs spek"):
        asyncio.run(compute_score("openai/gsm8k", "#### 1", "1", {}, url=stack, spek="x"))
    # The sync twin (older verl, legacy managers) answers the same.
    assert compute_score_sync("openai/gsm8k", "#### 18", "18", {}, url=stack) == {
        "score": 1.0,
        "math": 1.0,
        "code": pytest.approx(math.nan, nan_ok=True),
    }


def test_a_gateway_that_is_down(tokenizer_dir: Path) -> None:
    import transformers

    from tests.conftest import free_port

    tokenizer = transformers.AutoTokenizer.from_pretrained(tokenizer_dir)
    config = ppo_config(overrides(f"http://127.0.0.1:{free_port()}"), tokenizer_dir)
    with pytest.raises(ClientError):
        reward_loop(config, data_proto(tokenizer, [("openai/gsm8k", "q", "#### 1", "1", {})]))


def test_verls_sandbox_fusion_scorer_on_the_code_service(
    service: Callable[..., RunningService], redis_server: RedisServer, key_prefix: str
) -> None:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap not installed (the code sandbox)")
    from verl.utils.reward_score import default_compute_score

    code = service("code", env=redis_env(redis_server, key_prefix, TRIBUNAL_CODE_SLOTS="2"))
    # What reward.sandbox_fusion.url=<code service>/run_code makes main_ppo call.
    import multiprocessing

    semaphore = multiprocessing.Manager().Semaphore(2)
    kwargs = {
        "sandbox_fusion_url": f"{code.base_url}/run_code",
        "concurrent_semaphore": semaphore,
        "memory_limit_mb": 1024,
    }
    right = default_compute_score("codecontests", RIGHT_PROGRAM, json.dumps(SUM_TESTS), **kwargs)
    wrong = default_compute_score("codecontests", WRONG_PROGRAM, json.dumps(SUM_TESTS), **kwargs)
    assert (right, wrong) == (1.0, 0.0)
