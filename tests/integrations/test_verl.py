"""verl 0.9.1's own code against Tribunal: its Hydra config, its reward-function loader, its
reward-loop worker with the ``naive`` and ``dapo`` managers over a ``DataProto`` of rollouts
(GSM8K, MATH-500, stdio code), and its ``sandbox_fusion`` scorer against the code service.

verl runs in its own environment, installed as its users install it: .venv-verl, from
requirements/trainer-envs/verl.txt (verl's declared ranges: its transformers, its Hydra on the
ANTLR 4.9 runtime) with only tribunal-client added (tests/integrations/verl_driver.py, in a
process of its own); the services run in Tribunal's venv. Not run here: Ray's actor pool
(``RewardLoopManager`` spreads batches over ``RewardLoopWorker`` actors; the worker itself
runs, and the manager's merge of the workers' outputs is repeated as verl writes it) and vLLM
(the rollouts are token ids built with a byte-level tokenizer trained on the spot, no hub
download).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import shlex
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import (
    DATA,
    ROOT,
    RedisServer,
    RunningService,
    free_port,
    need_data,
    redis_env,
    start_service,
)
from tests.integrations.conftest import run_driver
from tribunal.client import ClientError
from tribunal.integrations.verl import RewardUnavailable, compute_score, compute_score_sync

pytestmark = pytest.mark.e2e

DRIVER = Path(__file__).with_name("verl_driver.py")


def run_verl(request: dict[str, Any]) -> dict[str, Any]:
    """verl_driver.py's answer to ``request``, run in .venv-verl."""
    return dict(run_driver("verl", DRIVER, request))


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


def reward_loop(
    url: str,
    tokenizer_dir: Path,
    rollouts: list[Rollout],
    *extra: str,
    num_turns: int | None = None,
    extra_fields: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """verl's reward loop (driver ``reward_loop``) over ``rollouts`` with the documented config
    plus ``extra`` overrides; ``extra_fields``: the agent loop's output fields of each."""
    return run_verl(
        {
            "op": "reward_loop",
            "overrides": overrides(url, *extra),
            "tokenizer": str(tokenizer_dir),
            "rollouts": rollouts,
            "num_turns": num_turns,
            "extra_fields": extra_fields,
        }
    )


# A spec that pays nothing for a failed sample (neither failed_reward nor undecided_reward).
NO_FAILED_REWARD = """
name: math_no_failed_reward
version: "1"
components:
  math:
    verifier: math
    inputs: {response: response, ground_truth: ground_truth}
"""


def start_stack(
    start: Callable[..., RunningService], redis: RedisServer, prefix: str, specs: Path
) -> str:
    """A gateway with the math and code services, started by ``start``, with the spec
    :data:`NO_FAILED_REWARD` (written into ``specs``) beside the shipped ones; its URL."""
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap not installed (the code sandbox)")
    env = redis_env(redis, prefix, TRIBUNAL_MATH_PROCESSES="1", TRIBUNAL_CODE_SLOTS="2")
    math_service = start("math", env=env)
    code = start("code", env=env)
    specs.mkdir(exist_ok=True)
    (specs / "math_no_failed_reward.yaml").write_text(NO_FAILED_REWARD)
    gateway = start(
        "gateway",
        env={
            **env,
            "TRIBUNAL_GATEWAY_MATH_URL": math_service.base_url,
            "TRIBUNAL_GATEWAY_CODE_URL": code.base_url,
            "TRIBUNAL_GATEWAY_SPECS_DIR": str(specs),
        },
    )
    return gateway.base_url


@pytest.fixture(scope="module")
def stack(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One stack for the module's tests (its start is most of a short test's time): none of
    them reads what another leaves in it, except the signature windows, whose test starts its
    own (``fresh_stack``)."""
    started: list[RunningService] = []
    logs = tmp_path_factory.mktemp("verl-stack")

    def start(name: str, env: dict[str, str]) -> RunningService:
        started.append(start_service(name, env=env, log_dir=logs))
        return started[-1]

    try:
        yield start_stack(start, redis_server, f"t{uuid.uuid4().hex[:10]}", logs / "specs")
    finally:
        for running in started:
            running.stop()


@pytest.fixture
def fresh_stack(
    service: Callable[..., RunningService],
    redis_server: RedisServer,
    key_prefix: str,
    tmp_path: Path,
) -> str:
    """A stack of this test alone; its URL."""
    return start_stack(service, redis_server, key_prefix, tmp_path / "specs")


def test_the_documented_config_is_what_verl_loads() -> None:
    url = "http://127.0.0.1:8100"
    ours = {
        "function": "tribunal.integrations.verl.compute_score",
        "reward_kwargs": {"url": url},
        "manager": "NaiveRewardManager",
        "awaited": True,
    }
    assert run_verl({"op": "load", "config": "ppo_trainer", "overrides": overrides(url)}) == ours
    # The fully-async entry point composes its own yaml over ppo_trainer and migrates.
    fully_async = {"op": "load", "config": "fully_async_ppo_trainer", "overrides": overrides(url)}
    assert run_verl(fully_async) == ours


def test_the_old_top_level_key_composes_but_main_ppo_ignores_it() -> None:
    # What the README said before verl 0.9: it composes without a word, and main_ppo's
    # reward loop finds no custom function (verl's own default_compute_score would run).
    old = [
        "custom_reward_function.path=pkg://tribunal.integrations.verl",
        "custom_reward_function.name=compute_score",
    ]
    assert run_verl({"op": "load", "config": "ppo_trainer", "overrides": old}) == {"function": None}


def test_naive_manager_routes_by_data_source(stack: str, tokenizer_dir: Path) -> None:
    answer = reward_loop(stack, tokenizer_dir, math_rollouts() + code_rollouts())
    scores = answer["scores"]
    # GSM8K gold, GSM8K wrong (x3), MATH-500 solutions, right and wrong program.
    assert scores == [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0]
    # The reward sits on each response's last real token (its EOS), as verl places it.
    assert answer["rm_scores"] == scores
    extra = answer["extra"]
    assert set(extra) == {"score", "math", "code"}
    assert all(math.isnan(v) for v in extra["code"][:8]) and extra["math"][:8] == scores[:8]
    assert all(math.isnan(v) for v in extra["math"][8:]) and extra["code"][8:] == [1.0, 0.0]


def test_dapo_manager_with_a_spec_and_turns(stack: str, tokenizer_dir: Path) -> None:
    rollouts = math_rollouts()[:2] + code_rollouts()
    spec = "+reward.custom_reward_function.reward_kwargs.spec=tcr_agent"
    dapo = reward_loop(
        stack, tokenizer_dir, rollouts, "reward.reward_manager.name=dapo", spec, num_turns=6
    )
    # dapo's manager passes no num_turns (naive's does): tcr_agent counts none, 2 turns.
    assert dapo["scores"] == [1.0, -1.0, 1.0, -1.0]
    assert set(dapo["extra"]) == {"score", "correct", "num_turns", "overlong", "failed"}
    assert dapo["extra"]["failed"] == [0.0] * 4
    naive = reward_loop(stack, tokenizer_dir, rollouts, spec, num_turns=6)
    # naive's passes the agent loop's 6 turns: a wrong answer is punished less.
    assert naive["scores"] == pytest.approx([1.0, -0.8, 1.0, -0.8])
    assert naive["extra"]["num_turns"] == [6.0] * 4


def test_a_failed_sample_gets_its_specs_failed_reward_and_the_others_are_scored(
    stack: str, tokenizer_dir: Path
) -> None:
    """verl has no missing value: a sample that failed (here a row without its ground truth)
    gets the reward its spec pays a failed item, which the gateway reports in the result
    (tcr_agent's failed_reward, -2.1), flagged in ``failed``; the batch's other samples are
    scored as usual, and training goes on."""
    gsm8k_gold, gsm8k_wrong = math_rollouts()[:2]
    right_program = code_rollouts()[0]
    no_truth = ("openai/gsm8k", "q", "#### 18", None, {})
    spec = "+reward.custom_reward_function.reward_kwargs.spec=tcr_agent"
    rollouts = [gsm8k_gold, no_truth, gsm8k_wrong, right_program]
    answer = reward_loop(stack, tokenizer_dir, rollouts, spec, num_turns=6)
    assert answer["scores"] == pytest.approx([1.0, -2.1, -0.8, 1.0])
    assert answer["rm_scores"] == pytest.approx(answer["scores"])
    assert answer["extra"]["failed"] == [0.0, 1.0, 0.0, 0.0]
    # The failed sample's components were not scored: NaN, as verl logs a missing value.
    correct = answer["extra"]["correct"]
    assert math.isnan(correct[1]) and [correct[0], correct[2], correct[3]] == [1.0, 0.0, 1.0]
    # A spec that sets no failed reward: the reward loop stops, saying what to set.
    neither = "+reward.custom_reward_function.reward_kwargs.spec=math_no_failed_reward"
    refused = reward_loop(stack, tokenizer_dir, [gsm8k_gold, no_truth], neither)
    assert refused["error"]["type"] == "RewardUnavailable"
    message = refused["error"]["message"]
    # verl's reward loop sends one sample a request: each is item 0 of its own.
    assert message.startswith("item 0: bad_input (math.ground_truth): ")
    assert "sets neither failed_reward nor undecided_reward" in message


def test_a_sample_goes_at_the_step_of_the_weights_that_wrote_it(
    fresh_stack: str, tokenizer_dir: Path
) -> None:
    """verl 0.9's rollout servers stamp each output with the global step of their weights
    (``min_global_steps`` / ``max_global_steps``), which the reward loop merges into
    ``extra_info``: each sample goes at its ``max_global_steps``, and the gateway windows its
    hack signatures by it; samples without one (a server never sent weights) by time."""
    import httpx

    rollouts = math_rollouts()[:2]
    spec = "+reward.custom_reward_function.reward_kwargs.spec=rloo_math"
    stamped = {"global_steps": 23, "min_global_steps": 22, "max_global_steps": 23}
    paid = reward_loop(fresh_stack, tokenizer_dir, rollouts, spec, extra_fields=stamped)
    unstamped = {"global_steps": None, "min_global_steps": None, "max_global_steps": None}
    again = reward_loop(fresh_stack, tokenizer_dir, rollouts, spec, extra_fields=unstamped)
    assert paid["scores"] == again["scores"] == [1.0, 0.0]
    windows: list[dict[str, Any]] = []
    for _ in range(100):
        specs = httpx.get(f"{fresh_stack}/v1/signatures").json()["specs"]
        windows = next((s["windows"] for s in specs if s["spec"] == "rloo_math"), [])
        if sum(w["items"] for w in windows) >= 4:
            break
        time.sleep(0.1)
    # rloo_math has no audit: windows of 10 steps (steps 20-29), then one of 60 s.
    assert [(w["window"], w["items"]) for w in windows][:1] == [("step:20", 2)]
    assert [w["window"][:5] for w in windows[1:]] == ["time:"] * (len(windows) - 1)
    assert sum(w["items"] for w in windows[1:]) == 2


def documented_managers() -> list[tuple[str, str, str]]:
    """``(kind, manager, function)`` for each manager of docs/integrations.md's table: ``loop``
    for verl's reward-loop managers, ``legacy`` for ``verl.workers.reward_manager``'s."""
    page = (ROOT / "docs" / "integrations.md").read_text()
    runs = []
    for line in page.splitlines():
        if not line.startswith(("| reward loop ", "| legacy ")):
            continue
        first, function = line.split("|")[1:3]
        kind = "legacy" if first.strip().startswith("legacy") else "loop"
        names = re.findall(r"`([a-z_]+)`", first.split("(")[0])
        [name] = re.findall(r"`([a-z_]+)`", function)
        runs += [(kind, manager, name) for manager in names]
    return runs


@pytest.mark.slow
@pytest.mark.timeout(600)  # eleven managers in one verl process
def test_every_verl_manager_pays_with_the_documented_function(
    stack: str, tokenizer_dir: Path
) -> None:
    runs = documented_managers()
    assert {(k, m) for k, m, _ in runs} == {
        ("loop", "naive"),
        ("loop", "dapo"),
        ("loop", "gdpo"),
        ("loop", "rate_limited"),
        ("loop", "remote"),
        ("legacy", "naive"),
        ("legacy", "dapo"),
        ("legacy", "batch"),
        ("legacy", "prime"),
    }
    # What the documented functions replace: prime with the dict (verl 0.8's docs), remote
    # with the async function.
    wrong = [("legacy", "prime", "compute_score_sync"), ("loop", "remote", "compute_score")]
    request = {
        "op": "managers",
        "overrides": overrides(stack),
        "tokenizer": str(tokenizer_dir),
        "rollouts": math_rollouts()[:2] + code_rollouts(),
        "runs": [dict(zip(("kind", "manager", "function"), r, strict=True)) for r in runs + wrong],
    }
    answers = run_verl(request)
    expected = [1.0, 0.0, 1.0, 0.0]  # GSM8K gold and wrong, the right and the wrong program
    assert {" ".join(r): answers[" ".join(r)] for r in runs} == {
        " ".join(r): expected for r in runs
    }
    assert answers["legacy prime compute_score_sync"] == [0.0] * 4  # the whole batch zeroed
    assert answers["loop remote compute_score"] == {"error": "AssertionError"}


def test_what_a_verl_user_sees_on_errors(stack: str, tokenizer_dir: Path) -> None:
    # A refused item (no ground truth): the reward loop raises with the gateway's reason.
    refused = reward_loop(stack, tokenizer_dir, [("openai/gsm8k", "q", "#### 18", None, {})])
    assert refused["error"]["type"] == "RewardUnavailable"
    assert refused["error"]["message"].startswith("item 0: bad_input (ground_truth): ")
    # An item nothing can score: a data_source with no verifier and no spec.
    unscorable = reward_loop(stack, tokenizer_dir, [("searchR1_nq", "q", "Paris", "Paris", {})])
    assert unscorable["error"]["type"] == "ValueError"
    assert "data_source 'searchR1_nq' names no verifier" in unscorable["error"]["message"]
    call_based = {"inputs": [[1, 2]], "outputs": [3], "fn_name": "add"}
    with pytest.raises(ValueError, match="fn_name='add'"):
        asyncio.run(compute_score("apps", RIGHT_PROGRAM, call_based, {}, url=stack))
    with pytest.raises(TypeError, match="unknown reward_kwargs spek"):
        asyncio.run(compute_score("openai/gsm8k", "#### 1", "1", {}, url=stack, spek="x"))
    with pytest.raises(RewardUnavailable, match=r"bad_input \(ground_truth\)"):
        asyncio.run(compute_score("openai/gsm8k", "#### 1", None, {}, url=stack))
    # The sync twin (older verl, legacy managers) answers the same.
    assert compute_score_sync("openai/gsm8k", "#### 18", "18", {}, url=stack) == {
        "score": 1.0,
        "math": 1.0,
        "code": pytest.approx(math.nan, nan_ok=True),
    }


def test_what_extra_info_carries_cannot_replace_the_answer_or_the_tests(stack: str) -> None:
    # verl's naive manager merges the agent loop's tool_extra_fields into extra_info: a tool's
    # output, which the policy shapes. A wrong answer or program stays wrong.
    # Tests the wrong program (a * b) passes, and the wrong answer as the ground truth.
    tests = {"kind": "stdio", "cases": [{"stdin": "1 2\n", "stdout": "2\n"}]}
    forged = {"ground_truth": "19", "tests": tests}
    wrong_math = ("openai/gsm8k", "#### 19", "18", forged)
    wrong_code = ("codecontests", WRONG_PROGRAM, SUM_TESTS, forged)
    for spec in ({}, {"spec": "tcr_agent"}):
        for source, response, truth, info in (wrong_math, wrong_code):
            score = compute_score_sync(source, response, truth, dict(info), url=stack, **spec)
            assert score["score"] == (-1.0 if spec else 0.0), (spec, source)


def test_a_gateway_that_is_down(tokenizer_dir: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    answer = reward_loop(url, tokenizer_dir, [("openai/gsm8k", "q", "#### 1", "1", {})])
    assert answer["error"]["type"] == "TransportError"
    with pytest.raises(ClientError):
        compute_score_sync("openai/gsm8k", "#### 1", "1", {}, url=url)


def test_verls_sandbox_fusion_scorer_on_the_code_service(
    service: Callable[..., RunningService], redis_server: RedisServer, key_prefix: str
) -> None:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap not installed (the code sandbox)")
    code = service("code", env=redis_env(redis_server, key_prefix, TRIBUNAL_CODE_SLOTS="2"))
    # verl's scorer with reward.sandbox_fusion.url exactly as docs/integrations.md gives it,
    # the test service's host and port in place of the default ones.
    page = (ROOT / "docs" / "integrations.md").read_text()
    [documented] = re.findall(r"`reward\.sandbox_fusion\.url=([^`]+)`", page)
    answer = run_verl(
        {
            "op": "sandbox_fusion",
            "url": documented.replace("http://127.0.0.1:8102", code.base_url, 1),
            "ground_truth": json.dumps(SUM_TESTS),
            "responses": [RIGHT_PROGRAM, WRONG_PROGRAM],
        }
    )
    assert answer == {"scores": [1.0, 0.0]}
