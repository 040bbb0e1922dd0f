"""The gateway as real processes in front of the four verifiers as real processes.

math, code, judge and citation each run ``tribunal api`` on the embedded queue; the gateway
runs ``tribunal api gateway`` + ``tribunal worker gateway`` on a real Redis. The judge
(directly and inside the refiner spec) grades against the scripted OpenAI-compatible server
(``FakeOpenAIServer``, in a thread of this process), which stands in for vLLM: it needs a
GPU and weights this machine does not have. Everything on our side of its socket is real.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import (
    DATA,
    TRIBUNAL,
    RedisServer,
    free_port,
    need_data,
    start_process,
    stop_process,
    wait_ready,
)
from tests.documents import assert_documented
from tribunal.llm.testing import FakeOpenAIServer, FakeScript

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed"),
]

EVIDENCE = {
    "S1": "The Eiffel Tower is 330 metres tall and stands in Paris.",
    "S2": "Bananas are rich in potassium.",
}
CITED = "<answer><cite id=S1>The Eiffel Tower is 330 metres tall.</cite></answer>"
ADD_TESTS = {"kind": "function", "entry_point": "add", "cases": [{"args": [2, 3], "expected": 5}]}


@dataclass
class Stack:
    """The running processes and the gateway's URL."""

    gateway: str
    urls: dict[str, str]
    judge: FakeOpenAIServer
    processes: dict[str, subprocess.Popen[bytes]]
    logs: dict[str, Path]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, redis_server: RedisServer) -> Iterator[Stack]:
    """Four verifiers, a fake judge model and the gateway, started once for this module."""
    tmp = tmp_path_factory.mktemp("gateway")
    judge = FakeOpenAIServer(FakeScript(rules=[("invents", 0)]))
    judge.start()
    processes: dict[str, subprocess.Popen[bytes]] = {}
    logs: dict[str, Path] = {}
    urls = {
        name: f"http://127.0.0.1:{free_port()}" for name in ("math", "code", "judge", "citation")
    }
    gateway = f"http://127.0.0.1:{free_port()}"
    memory = {"TRIBUNAL_QUEUE": "memory", "TRIBUNAL_MATH_PROCESSES": "1"}
    judge_env = {"TRIBUNAL_JUDGE_BASE_URL": judge.base_url, "TRIBUNAL_JUDGE_MODEL": "fake-judge"}
    gateway_env = {
        "TRIBUNAL_QUEUE": "redis",
        "TRIBUNAL_REDIS_URL": redis_server.url,
        "TRIBUNAL_KEY_PREFIX": f"gw{free_port()}",
        **{f"TRIBUNAL_GATEWAY_{name.upper()}_URL": url for name, url in urls.items()},
    }
    argvs: dict[str, tuple[list[str], dict[str, str]]] = {
        name: ([*TRIBUNAL, "api", name, "--port", url.rsplit(":", 1)[1]], {**memory, **judge_env})
        for name, url in urls.items()
    }
    argvs["gateway"] = (
        [*TRIBUNAL, "api", "gateway", "--port", gateway.rsplit(":", 1)[1]],
        gateway_env,
    )
    argvs["gateway-worker"] = ([*TRIBUNAL, "worker", "gateway"], gateway_env)
    try:
        for label, (argv, env) in argvs.items():
            logs[label] = tmp / f"{label}.log"
            processes[label] = start_process(argv, env, logs[label])
        for url in [*urls.values(), gateway]:
            wait_ready(url, 90, processes)
        yield Stack(gateway, urls, judge, processes, logs)
    except BaseException:
        for label, path in logs.items():
            print(f"--- {label}\n{path.read_text()}")
        raise
    finally:
        for process in processes.values():
            stop_process(process)
        judge.stop()


def post(url: str, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{url}{path}", json=body, timeout=120)


def test_mixed_items_across_all_four_verifiers_come_back_in_order(stack: Stack) -> None:
    judge_item = {
        "question": "How tall is the Eiffel Tower?",
        "response": CITED,
        "positive_rubrics": ["States the height"],
        "negative_rubrics": ["invents a source"],
    }
    items = [
        {
            "id": "m1",
            "verifier": "math",
            "response": "so \\boxed{\\frac{1}{2}}",
            "ground_truth": "0.5",
        },
        {
            "id": "c1",
            "verifier": "code",
            "language": "python",
            "code": "def add(a, b):\n    return a + b\n",
            "tests": ADD_TESTS,
        },
        {"id": "j1", "verifier": "judge", **judge_item, "rubric_sets": ["v3"]},
        {"id": "t1", "verifier": "citation", "response": CITED, "evidence": EVIDENCE},
        {"id": "r1", "spec": "refiner_rubric_citation", **judge_item, "evidence": EVIDENCE},
        {"id": "bad", "verifier": "math", "response": "1"},
        {
            "id": "k1",
            "spec": "tcr_agent",
            "response": "```python\ndef add(a, b):\n    return a - b\n```",
            "tests": ADD_TESTS,
            "num_turns": 6,
        },
        {"id": "m2", "verifier": "math", "response": "The answer is 3", "ground_truth": "4"},
    ]
    response = post(stack.gateway, "/v1/score", {"items": items})
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [r["id"] for r in results] == [i["id"] for i in items]
    for result in results:  # the verifiers' details as they came, the specs' SpecDetails
        assert_documented("gateway", "GatewayItemResult", result)
    by_id = {r["id"]: r for r in results}
    assert by_id["m1"]["reward"] == 1.0 and by_id["m1"]["verifier"]["name"] == "math"
    assert by_id["m2"]["reward"] == 0.0
    assert by_id["c1"]["reward"] == 1.0 and by_id["c1"]["details"]["all_passed"] is True
    assert by_id["t1"]["reward"] == 1.0 and by_id["t1"]["verifier"]["name"] == "citation"
    judged = by_id["j1"]["details"]["rubrics"]
    assert len(judged) == 5  # 2 instance rubrics + the 3 of v3
    assert by_id["j1"]["reward"] == pytest.approx(sum(r["reward_term"] for r in judged) / 5)
    assert by_id["j1"]["verifier"]["name"] == "judge"
    assert by_id["bad"]["reward"] is None and by_id["bad"]["error"]["code"] == "bad_input"
    assert by_id["bad"]["error"]["field"] == "ground_truth"  # named without the math batch's index
    assert by_id["bad"]["error"]["message"] == "ground_truth: Field required"
    # The refiner spec, recomputed from its components, which match the direct calls.
    refiner = by_id["r1"]
    subs = refiner["details"]["sub_rewards"]
    assert subs["judge"]["reward"] == by_id["j1"]["reward"]
    assert subs["citation"]["reward"] == by_id["t1"]["reward"]
    assert refiner["reward"] == pytest.approx(
        10 * subs["judge"]["reward"] + 0.2 * subs["citation"]["reward"]
    )
    assert refiner["verifier"]["name"] == "spec:refiner_rubric_citation"
    # tcr_agent, coding row: the tests fail, so min(-0.6, -1 + 0.05 * (6 - 2)) = -0.8.
    assert by_id["k1"]["reward"] == pytest.approx(-0.8)
    assert by_id["k1"]["details"]["sub_rewards"]["correct"]["source"] == "code"


def test_the_synchronous_route_refuses_what_a_job_would_refuse(stack: Stack) -> None:
    """/v1/score checks a batch as POST /v1/jobs does (one service method): past
    TRIBUNAL_MAX_BATCH_ITEMS (default 4,096) a 413 naming ``items``, not scored; a batch with
    no valid item is answered item by item, each with its error (issue 36)."""
    bad = {"id": "x", "verifier": "nope", "response": "4"}
    too_many = post(stack.gateway, "/v1/score", {"items": [bad] * 4097})
    assert too_many.status_code == 413
    assert too_many.json()["error"]["field"] == "items"
    assert "split the batch or use /v1/jobs" in too_many.json()["error"]["message"]
    none_valid = post(stack.gateway, "/v1/score", {"items": [bad, bad]})
    assert none_valid.status_code == 200, none_valid.text
    errors = [r["error"] for r in none_valid.json()["results"]]
    assert [(e["code"], e["field"]) for e in errors] == [
        ("bad_input", f"items.{i}") for i in (0, 1)
    ]


def test_jobs_and_long_poll_on_the_gateway(stack: Stack) -> None:
    items = [
        {
            "id": f"m{i}",
            "spec": "rloo_math",
            "response": f"\\boxed{{{i}}}",
            "ground_truth": str(i % 3),
        }
        for i in range(20)
    ]
    body = {"verifier": "gateway", "items": items, "idempotency_key": f"k{free_port()}"}
    created = post(stack.gateway, "/v1/jobs", body)
    assert created.status_code == 202, created.text
    again = post(stack.gateway, "/v1/jobs", body).json()
    assert again == {"job_id": created.json()["job_id"], "created": False}
    state = httpx.get(f"{stack.gateway}/v1/jobs/{again['job_id']}?wait=30", timeout=60).json()
    assert state["status"] == "done" and state["completed"] == 20
    assert_documented("gateway", "JobState", state)
    assert [r["reward"] for r in state["results"]] == [float(i == i % 3) for i in range(20)]


def test_openrlhf_get_reward(stack: Stack) -> None:
    # OpenRLHF's body, {"query": queries, "prompts": prompts, "labels": labels}, with two
    # queries (0.11's SingleTurnAgentExecutor sends one: tests/integrations/test_openrlhf.py
    # runs it); openrlhf/cli/serve_rm.py answers
    #     {"rewards": rewards, "scores": rewards, "extra_logs": {"dummy_scores": rewards}}
    prompt = "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"
    queries = [prompt + "It is \\boxed{4}.<|im_end|>", prompt + "It is 5.<|im_end|>"]
    body = {"query": queries, "prompts": [prompt, prompt], "labels": ["4", "4"]}
    answer = post(stack.gateway, "/get_reward", body)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "rewards": [1.0, 0.0],
        "scores": [1.0, 0.0],
        "extra_logs": {"math": [1.0, 0.0], "undecided": [0.0, 0.0], "failed": [0.0, 0.0]},
        "errors": [],
    }
    tcr = post(stack.gateway, "/get_reward/tcr_agent", body).json()
    assert tcr["rewards"] == [1.0, -1.0] and tcr["scores"] == [1.0, 0.0]
    # No labels at all: the request's shape is wrong, refused naming the field.
    refused = post(stack.gateway, "/get_reward", {"query": queries, "prompts": [prompt, prompt]})
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "bad_input"
    assert refused.json()["error"]["field"] == "labels"
    # One null label, or one item the verifier refuses (a label object without ground_truth):
    # that item alone gets the spec's failed reward (rloo_math: 0) and is listed; the other
    # is scored.
    for label, field in ((None, "labels.1"), ({"num_turns": 3}, "math.ground_truth")):
        for right in (queries[0], prompt + "It is \\boxed{5}.<|im_end|>"):
            one = {**body, "query": [right, queries[0]], "labels": ["4", label]}
            failed = post(stack.gateway, "/get_reward", one)
            assert failed.status_code == 200, failed.text
            reward = 1.0 if right == queries[0] else 0.0
            assert failed.json()["rewards"] == [reward, 0.0]
            assert failed.json()["extra_logs"]["failed"] == [0.0, 1.0]
            [error] = failed.json()["errors"]
            assert (error["index"], error["code"], error["field"]) == (1, "bad_input", field)


@pytest.mark.parametrize("end", ["<|im_end|>", "</s>", "<|eot_id|>", "<|endoftext|>"])
def test_openrlhf_gsm8k_gold_solutions_ending_in_eos_are_paid(stack: Stack, end: str) -> None:
    # OpenRLHF 0.11 decodes prompt + response with skip_special_tokens=False and sends one
    # sample per request, so a finished sequence ends in its EOS (and padding after it).
    lines = need_data(DATA / "math" / "gsm8k_test.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines[:25]]
    prompt = "<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n"
    rewards = []
    for row in rows[:25]:
        templated = prompt.format(q=row["question"])
        body = {
            "query": [templated + row["answer"] + end + "<|endoftext|>" * 2],
            "prompts": [templated],
            "labels": [row["answer"].split("####")[-1].strip()],
        }
        answer = post(stack.gateway, "/get_reward", body)
        assert answer.status_code == 200, answer.text
        rewards += answer.json()["rewards"]
    assert rewards == [1.0] * 25


def test_openrlhf_an_undecided_answer_gets_the_specs_policy(stack: Stack) -> None:
    # A power tower runs past the math service's deadline (its process is killed): its math
    # component takes the spec's undecided_reward (the other components still apply, issue
    # 36), never a retryable 504 for the batch that OpenRLHF would retry into the same failure.
    prompt = "<|im_start|>user\nWhat is 3+4?<|im_end|>\n<|im_start|>assistant\n"
    tower = prompt + "It is \\boxed{9^{9^{9^{9}}}}.<|im_end|>"
    queries = [prompt + "It is \\boxed{7}.<|im_end|>", tower, prompt + "It is 8.<|im_end|>"]
    body = {"query": queries, "prompts": [prompt] * 3, "labels": ["7"] * 3}
    answer = post(stack.gateway, "/get_reward", body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["rewards"] == [1.0, 0.0, 0.0]
    assert answer.json()["extra_logs"]["undecided"] == [0.0, 1.0, 0.0]
    tcr = post(stack.gateway, "/get_reward/tcr_agent", body).json()
    assert tcr["rewards"] == [1.0, -1.0, -1.0] and tcr["extra_logs"]["undecided"] == [0, 1, 0]
    # Its prompt not found: failed by name, never scored whole; the others are scored.
    moved = {**body, "prompts": [prompt, "Another question?", prompt]}
    failed = post(stack.gateway, "/get_reward/tcr_agent", moved)
    assert failed.status_code == 200, failed.text
    assert failed.json()["rewards"] == [1.0, -2.1, -1.0]
    assert [(e["index"], e["field"]) for e in failed.json()["errors"]] == [(1, "query.1")]
    # A number past float range from a rollout is that item's bad input, not a batch's 500.
    text = (
        '{"items": [{"id": "huge", "spec": "tcr_agent", "response": "\\\\boxed{8}", '
        '"ground_truth": "7", "num_turns": 1' + "0" * 400 + '}, {"id": "ok", "spec": '
        '"tcr_agent", "response": "\\\\boxed{7}", "ground_truth": "7", "num_turns": 4}]}'
    )
    scored = httpx.post(
        f"{stack.gateway}/v1/score",
        content=text,
        headers={"content-type": "application/json"},
        timeout=120,
    )
    assert scored.status_code == 200, scored.text
    huge, ok = scored.json()["results"]
    assert huge["reward"] is None and huge["error"]["code"] == "bad_input"
    assert "num_turns" in huge["error"]["field"] and ok["reward"] == 1.0


def test_a_verifier_that_is_down_is_an_error_never_a_zero(stack: Stack) -> None:
    stop_process(stack.processes["citation"])
    items = [
        {"id": "t", "verifier": "citation", "response": CITED, "evidence": EVIDENCE},
        {
            "id": "r",
            "spec": "refiner_balanced",
            "question": "q",
            "response": CITED,
            "positive_rubrics": ["States the height"],
            "evidence": EVIDENCE,
        },
        {"id": "m", "verifier": "math", "response": "1", "ground_truth": "1"},
    ]
    results = post(stack.gateway, "/v1/score", {"items": items}).json()["results"]
    direct, refiner, fine = results
    assert direct["reward"] is None and direct["error"]["code"] == "backend_unavailable"
    assert direct["error"]["retryable"] is True
    assert refiner["reward"] is None and refiner["error"]["code"] == "backend_unavailable"
    assert refiner["details"]["sub_rewards"]["judge"]["status"] == "scored"
    assert fine["reward"] == 1.0
