"""OpenRLHF 0.11.2's own remote-reward path against a running gateway.

OpenRLHF runs in its own environment, installed as its users install it: .venv-openrlhf, from
requirements/trainer-envs/openrlhf.txt (OpenRLHF's declared ranges: transformers 5.15.0,
deepspeed 0.19.6, ray 2.55.0; flash-attn left out, its build needs CUDA) with only
tribunal-client added. Its code runs in tests/integrations/openrlhf_driver.py, one process for
the module, which says what runs of OpenRLHF's and what is stood in for (vLLM and flash-attn,
which need a GPU; Ray's cluster). Real processes: math and the gateway on the embedded queue,
in Tribunal's venv.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import DATA, ROOT, RunningService, need_data
from tests.integrations.conftest import trainer_python

pytestmark = pytest.mark.e2e

EOS = "<|im_end|>"
DRIVER = Path(__file__).with_name("openrlhf_driver.py")

Ask = Callable[..., Any]


@pytest.fixture(scope="module")
def openrlhf(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ask]:
    """``ask(op, **fields)``: openrlhf_driver.py's answer, from one driver process in
    .venv-openrlhf whose tokenizer is trained on the first 20 GSM8K rows."""
    log = tmp_path_factory.mktemp("openrlhf") / "driver.log"
    with log.open("w") as stderr:
        driver = subprocess.Popen(
            [str(trainer_python("openrlhf")), str(DRIVER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            cwd=ROOT,
        )
    assert driver.stdin is not None and driver.stdout is not None
    stdin, stdout = driver.stdin, driver.stdout

    def ask(op: str, **fields: Any) -> Any:
        stdin.write(json.dumps({"op": op, **fields}) + "\n")
        stdin.flush()
        line = stdout.readline()
        assert line, log.read_text()[-4000:]
        answer = json.loads(line)
        assert not (isinstance(answer, dict) and "error" in answer), answer
        return answer

    try:
        ask("tokenizer", corpus=[row["gold"] + row["question"] for row in gsm8k(20)])
        yield ask
    finally:
        stdin.close()
        # Ended at once: its interpreter's own exit (torch's and DeepSpeed's threads) takes
        # seconds, and the driver holds nothing that needs it.
        driver.terminate()
        driver.wait(timeout=60)
        stdout.close()


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


@pytest.fixture
def gateway(service: Callable[..., RunningService]) -> Callable[..., RunningService]:
    def start(**env: str) -> RunningService:
        memory = {"TRIBUNAL_QUEUE": "memory", "TRIBUNAL_MATH_PROCESSES": "1", **env}
        math = service("math", env=memory)
        return service("gateway", env={**memory, "TRIBUNAL_GATEWAY_MATH_URL": math.base_url})

    return start


def test_gsm8k_gold_is_paid_and_wrong_is_not_through_openrlhfs_executor(
    openrlhf: Ask, gateway: Callable[..., RunningService]
) -> None:
    rows = gsm8k(12)
    url = f"{gateway().base_url}/get_reward/rloo_math"
    script = {r["question"]: [r["gold"], r["wrong"]] for r in rows}
    samples = [
        {"url": url, "question": r["question"], "label": r["label"]} for r in rows for _ in "gw"
    ]
    answers = openrlhf("execute", script=script, samples=samples)
    paid = []
    for row, gold, wrong in zip(rows, answers[::2], answers[1::2], strict=True):
        # as sent: the whole templated prompt, then the response and its EOS
        assert gold["query"].startswith(gold["prompt"])
        assert gold["query"].endswith(row["gold"] + EOS)
        paid.append((gold["reward"], wrong["reward"], gold["scores"], wrong["scores"]))
        assert gold["extra_logs"] == {"math": [1.0], "undecided": [0.0], "failed": [0.0]}
    assert paid == [([1.0], [0.0], [1.0], [0.0])] * len(rows)


def test_a_prompt_openrlhf_truncates_is_scored_counted_and_logged_once(
    openrlhf: Ask, gateway: Callable[..., RunningService]
) -> None:
    rows = gsm8k(3)
    running = gateway()
    url = f"{running.base_url}/get_reward/rloo_math"
    script = {r["question"]: [r["gold"], r["wrong"]] for r in rows}
    # --max_len leaves room for all of the prompt but its first 12 tokens.
    samples = [
        {"url": url, "question": r["question"], "label": r["label"], "drop": 12}
        for r in rows
        for _ in "gw"
    ]
    answers = openrlhf("execute", script=script, samples=samples)
    paid = []
    for row, gold, wrong in zip(rows, answers[::2], answers[1::2], strict=True):
        # as sent: a query that starts inside the prompt
        assert not gold["query"].startswith(gold["prompt"])
        assert gold["query"].endswith(row["gold"] + EOS)
        paid.append((gold["reward"], wrong["reward"]))
    assert paid == [([1.0], [0.0])] * len(rows)
    metrics = httpx.get(f"{running.base_url}/metrics").text
    line = 'tribunal_trainer_prompts_truncated_total{route="openrlhf",spec="rloo_math"}'
    assert f"{line} 6.0" in metrics
    log = running.logs["api"].read_text()
    assert log.count("start inside their prompt") == 1  # six samples, one line per minute


def test_a_tcr_agent_group_survives_dynamic_filtering_and_gets_advantages(
    openrlhf: Ask, gateway: Callable[..., RunningService]
) -> None:
    # tcr_agent pays +1 / -1: only scores (correctness) in [0, 1] let a mixed group through
    # OpenRLHF's filter, which keeps a group whose mean score lies strictly in (0, 1).
    rows = gsm8k(4)
    url = f"{gateway().base_url}/get_reward/tcr_agent"
    mixes = [(2, 2), (4, 0), (0, 4), (1, 3)]  # (gold, wrong) per prompt, four samples each
    groups = [
        {
            "question": row["question"],
            "label": row["label"],
            "responses": [row["gold"]] * gold + [row["wrong"]] * wrong,
        }
        for row, (gold, wrong) in zip(rows, mixes, strict=True)
    ]
    answer = openrlhf("filter", url=url, groups=groups)
    assert answer["consumed"] == 4 and answer["exhausted"]
    assert answer["kept"] == [0] * 4 + [3] * 4
    rewards = answer["rewards"]
    assert rewards == [[1.0]] * 2 + [[-1.0]] * 2 + [[1.0]] + [[-1.0]] * 3
    assert answer["scores"] == [[(r[0] + 1) / 2] for r in rewards]
    assert answer["correct"] == [[(r[0] + 1) / 2] for r in rewards]
    assert answer["batches"] == [4, 4]  # Experience.concat_experiences, 4 a batch
    advantages, lowest = answer["highest"], answer["lowest"]
    signs = [1 if a > 0 else -1 for a in (advantages[:2] + lowest[2:4] + advantages[4:5])]
    assert signs == [1, 1, -1, -1, 1] and all(a < 0 for a in lowest[5:])
    # std of (1, 1, -1, -1), unbiased
    assert answer["group_std"] == pytest.approx([2 / 3**0.5] * 4)


def metric(base_url: str, route: str, spec: str, code: str, name: str = "samples_refused") -> float:
    text = httpx.get(f"{base_url}/metrics").text
    pattern = (
        rf'tribunal_trainer_{name}_total\{{code="{code}",route="{route}",'
        rf'spec="{spec}"\}} ([0-9.]+)'
    )
    found = re.search(pattern, text)
    return float(found[1]) if found else 0.0


def test_a_group_with_failed_samples_trains_and_the_rest_is_scored(
    openrlhf: Ask, gateway: Callable[..., RunningService]
) -> None:
    # Two prompts of four samples each: one with its label, one with an empty label (what
    # OpenRLHF sends without --data.label_key). Each sample is one request, as in training.
    first, second = gsm8k(2)
    running = gateway()
    url = f"{running.base_url}/get_reward/rloo_math"
    groups = [
        {
            "question": first["question"],
            "label": first["label"],
            "responses": [first["gold"], first["wrong"]] * 4,
        },
        {"question": second["question"], "label": "", "responses": [second["gold"]] * 8},
    ]
    answer = openrlhf("failed_group", url=url, groups=groups)
    assert answer["consumed"] == 2 and len(answer["rewards"]) == 8
    # The good prompt's samples are scored; the bad one's get rloo_math's failed reward (its
    # undecided_reward, 0, its lowest), a score of 0 and a 1 in info["failed"].
    assert answer["rewards"] == [1.0, 0.0] * 2 + [0.0] * 4
    assert answer["failed"] == [0.0] * 4 + [1.0] * 4
    # Counted and logged per failed item: four in each of the driver's two passes (the second
    # with dynamic filtering, below).
    assert metric(running.base_url, "openrlhf", "rloo_math", "bad_input", "items_failed") == 8
    log = running.log_text()
    assert log.count("openrlhf item 0 failed (bad_input), given the spec's failed reward 0") == 8
    assert 'labels.0: \'labels.0: the label is ""; set --data.label_key' in log

    # OpenRLHF's experience making and its replay buffer's split take the batch: every
    # sample's logs have the same keys.
    assert answer["split_failed"] == [0.0] * 4 + [1.0] * 4
    # A failed group has no spread: every advantage 0, nothing learnt from it.
    good, *failed = answer["advantages"]
    assert all(a == 0 for advantages in failed for a in advantages)
    assert any(a > 0 for a in good)
    # With dynamic filtering on, the failed group's mean score, 0, drops it.
    assert answer["kept"] == [0] * 4
    # Were a key missing from one sample's logs (as when only some items carry it), the
    # replay buffer's split would refuse the whole batch.
    error = answer["split_error"]
    assert error["type"] == "ValueError"
    assert re.search(r"Size of info\[failed\] \(3\)", error["message"]), error


def test_what_openrlhf_does_with_a_refused_sample_a_verifier_down_and_the_gateway_down(
    openrlhf: Ask, service: Callable[..., RunningService]
) -> None:
    [row] = gsm8k(1)
    memory = {"TRIBUNAL_QUEUE": "memory", "TRIBUNAL_MATH_PROCESSES": "1"}
    math = service("math", env=memory)
    env = {**memory, "TRIBUNAL_GATEWAY_MATH_URL": math.base_url, "TRIBUNAL_GATEWAY_RETRIES": "0"}
    running = service("gateway", env=env)
    question, label = row["question"], row["label"]
    script = {question: [row["gold"]] * 4}
    rloo = f"{running.base_url}/get_reward/rloo_math"
    # An unknown spec is the request's error (422): OpenRLHF, after its five tries 1 s apart,
    # logs at INFO and keeps the sample with a reward of None. Counted under "unknown",
    # whatever name was sent.
    samples = [
        {"url": f"{running.base_url}/get_reward/no_such_spec", "question": question, "label": label}
    ]
    [refused] = openrlhf("execute", script=script, samples=samples)
    assert (refused["reward"], refused["scores"], refused["extra_logs"]) == (None, None, {})
    assert metric(running.base_url, "openrlhf", "unknown", "bad_input") == 5.0
    log = running.log_text()
    assert "openrlhf sample refused (bad_input, HTTP 422): spec 'no_such_spec', prompt '" in log
    # The math service down behind the gateway: 503, the same None, counted by its class; the
    # gateway down: the same None, after the same five tries.
    math.stop()
    samples = [
        {"url": rloo, "question": question, "label": label},
        {"url": "http://127.0.0.1:9/get_reward/rloo_math", "question": question, "label": label},
    ]
    assert [a["reward"] for a in openrlhf("execute", script=script, samples=samples)] == [
        None,
        None,
    ]
    assert metric(running.base_url, "openrlhf", "rloo_math", "backend_unavailable") == 5.0
    assert "openrlhf sample refused (backend_unavailable, HTTP 503)" in running.log_text()
    # What a None reward does in OpenRLHF's experience making: it trains on nothing and
    # fails later, far from the cause.
    none = openrlhf(
        "none_reward",
        url="http://127.0.0.1:9/get_reward/rloo_math",
        question=question,
        response=row["gold"],
    )
    assert (none["reward"], none["rewards"], none["scores"]) == (None, None, None)
    assert none["advantages_error"] == {
        "type": "AttributeError",
        "message": "'NoneType' object has no attribute 'to'",
    }


def test_with_an_api_key_openrlhf_gets_in_by_basic_credentials_or_the_key_path(
    openrlhf: Ask, gateway: Callable[..., RunningService]
) -> None:
    # OpenRLHF's client posts to a bare URL with no header; aiohttp sends a URL's user
    # information as Basic credentials, and /k/<key>/ carries the key in the path.
    key = "k3y-for-openrlhf"
    running = gateway(TRIBUNAL_API_KEY=key)
    [row] = gsm8k(1)
    host = running.base_url.removeprefix("http://")
    urls = [
        f"http://openrlhf:{key}@{host}/get_reward/rloo_math",
        f"{running.base_url}/k/{key}/get_reward/rloo_math",
        f"{running.base_url}/get_reward/rloo_math",  # no key: 401, then a reward of None
    ]
    script = {row["question"]: [row["gold"]] * len(urls)}
    samples = [{"url": u, "question": row["question"], "label": row["label"]} for u in urls]
    answers = openrlhf("execute", script=script, samples=samples)
    assert [a["reward"] for a in answers] == [[1.0], [1.0], None]
    prompt = answers[0]["prompt"]
    body = {"query": [prompt + "#### 18"], "prompts": [prompt], "labels": ["18"]}
    for url in (f"/k/{key}x/get_reward/rloo_math", "/k//get_reward/rloo_math"):
        assert httpx.post(running.base_url + url, json=body).status_code in (401, 404)
    wrong = httpx.post(f"{running.base_url}/k/{key[:-1]}/get_reward/rloo_math", json=body)
    assert wrong.status_code == 401 and key not in wrong.text


def test_the_documented_flags_are_openrlhf_0_11s_own(openrlhf: Ask) -> None:
    # docs/integrations.md's training command, each flag looked up in OpenRLHF 0.11.2's
    # train_ppo_ray.py, as installed in its environment (its parser is built under __main__,
    # so its source is read).
    from tests.e2e.test_readme import sh_blocks

    [block] = [
        b for b in sh_blocks(ROOT / "docs" / "integrations.md") if "openrlhf.cli.train_ppo_ray" in b
    ]
    flags = re.findall(r"(--[a-z_.]+)", block)
    assert {"--reward.remote_url", "--data.label_key", "--algo.dynamic_filtering_enable"} <= set(
        flags
    )
    source = openrlhf("train_ppo_ray")
    assert [f for f in flags if f'"{f}"' not in source] == []
    assert '"--remote_rm_url"' not in source  # the pre-0.11 name is gone
