"""A spec's judge cost per step window and its budget, through the gateway's processes (#40).

The judge service (embedded queue) asks the fake OpenAI-compatible server (real HTTP) at a
price; the gateway runs two API processes on a real Redis. The test is the trainer: it sends
batches of a judged spec with a budget until one is refused, then checks that what the
gateway counted is what the answered items' ``details.usage.cost_usd`` add up to, per step
window and in ``/metrics``, and that every later batch is refused by name.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import RedisServer, RunningService, redis_env
from tribunal.llm.testing import FakeOpenAIServer

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

BUDGET_USD = 0.05
JUDGED = f"""
name: judged
version: "1"
budget_usd: {BUDGET_USD}
components:
  judge:
    verifier: judge
    inputs: {{question: question, response: response, rubrics: {{value: [{{text: ok}}]}}}}
"""


def test_judge_cost_per_window_and_a_spent_budget_refuses_the_next_batch(
    service: Callable[..., RunningService],
    tmp_path: Path,
    redis_server: RedisServer,
    openai_compat_server: FakeOpenAIServer,
) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "judged.yaml").write_text(JUDGED)
    judge = service(
        "judge",
        env={
            "TRIBUNAL_QUEUE": "memory",
            "TRIBUNAL_JUDGE_BASE_URL": openai_compat_server.base_url,
            "TRIBUNAL_JUDGE_MODEL": "fake-judge",
            "TRIBUNAL_JUDGE_PRICE": '{"prompt": 10, "completion": 10}',
        },
    )
    env = redis_env(
        redis_server,
        f"budget{random.getrandbits(32):x}",
        TRIBUNAL_GATEWAY_JUDGE_URL=judge.base_url,
        TRIBUNAL_GATEWAY_SPECS_DIR=str(specs),
        TRIBUNAL_API_PROCESSES="2",
    )
    gateway = service("gateway", env=env)
    paid = 0.0
    with gateway.http() as client:
        for step in range(50):
            items = [
                {
                    "id": f"s{step}-{k}",
                    "spec": "judged",
                    "question": "Q?",
                    "response": f"answer {step} {k}",
                }
                for k in range(2)
            ]
            answer = client.post("/v1/score", json={"step": step, "items": items})
            if answer.status_code == 402:
                break
            assert answer.status_code == 200, answer.text
            for result in answer.json()["results"]:
                assert result["reward"] is not None, result
                paid += result["details"]["sub_rewards"]["judge"]["details"]["usage"]["cost_usd"]
            # The spend is counted after the answer: the next batch sees it once counted.
            for _ in range(100):
                report = {s["spec"]: s for s in client.get("/v1/signatures").json()["specs"]}
                if report.get("judged", {}).get("cost_usd", 0) >= paid - 1e-9:
                    break
                time.sleep(0.05)
        else:
            raise AssertionError(f"no batch refused after ${paid:g} of ${BUDGET_USD:g}")
        error = answer.json()["error"]
        assert (error["code"], error["field"]) == ("budget_spent", "items.0.spec")
        assert "'judged' spent $" in error["message"] and "budget_usd $0.05" in error["message"]
        assert paid >= BUDGET_USD > 0 and step >= 2  # batches were paid before the refusal
        # The windows are written a linger (0.25 s) after the counter the budget reads.
        for _ in range(100):
            [report] = [
                s for s in client.get("/v1/signatures").json()["specs"] if s["spec"] == "judged"
            ]
            if sum(w["cost_usd"] for w in report["windows"]) >= paid - 1e-8:
                break
            time.sleep(0.05)
        assert report["cost_usd"] == pytest.approx(paid, abs=1e-8)
        assert report["budget_usd"] == BUDGET_USD
        # Windows of 10 steps: their costs add up to what the answers said they cost.
        assert report["windows"][0]["window"] == "step:0"
        assert sum(w["cost_usd"] for w in report["windows"]) == pytest.approx(paid, abs=1e-8)
        assert all(w["unpriced"] == 0 for w in report["windows"])
        metrics = client.get("/metrics").text
        [spent] = re.findall(r'tribunal_spec_cost_usd_total\{spec="judged"\} (\S+)', metrics)
        assert float(spent) == pytest.approx(paid, abs=1e-8)
        # Refused on every replica, and on the trainer's other routes too: nothing is scored.
        calls = len(openai_compat_server.stats.requests)
        for _ in range(4):
            again = client.post("/v1/score", json={"items": items})
            assert again.status_code == 402 and again.json()["error"]["code"] == "budget_spent"
        assert len(openai_compat_server.stats.requests) == calls
