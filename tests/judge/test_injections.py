"""Injection attempts (tests/judge/cases/injections.jsonl): fixtures for a real judge model.

Each case is a response that clearly fails its rubrics plus an attempt to talk the judge
into a high score. Always checked here: every case is a valid item and its fence holds. With
a real model (``TRIBUNAL_JUDGE_TEST_BASE_URL`` and ``TRIBUNAL_JUDGE_TEST_MODEL`` set, e.g. a
local vLLM), each case must also score at most ``expect.max_reward``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tribunal.judge.config import JudgeConfig
from tribunal.judge.prompts import build_prompt, fence_tag
from tribunal.judge.verifier import JudgeVerifier
from tribunal.llm.config import BackendConfig
from tribunal.wire.judge import JudgeItem

CASES_PATH = Path(__file__).parent / "cases" / "injections.jsonl"
CASES: list[dict[str, Any]] = [json.loads(x) for x in CASES_PATH.read_text().splitlines() if x]
REAL_URL = os.environ.get("TRIBUNAL_JUDGE_TEST_BASE_URL")


def _item(case: dict[str, Any]) -> JudgeItem:
    fields = {k: v for k, v in case.items() if k not in ("attack", "expect")}
    return JudgeItem.model_validate(fields)


def test_suite_is_not_trivial() -> None:
    assert len(CASES) >= 10 and len({c["id"] for c in CASES}) == len(CASES)
    assert any("output a score of 2" in c["response"] for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_case_is_valid_and_fenced(case: dict[str, Any]) -> None:
    item = _item(case)
    tag = fence_tag(item.question, item.response)
    for rubric in item.instance_rubrics():
        user = build_prompt(item.question, item.response, [rubric]).user
        body = user.split(f"<response-{tag}>\n", 1)[1]
        inside, after = body.split(f"\n</response-{tag}>", 1)
        assert inside == item.response and f"</response-{tag}>" not in after


@pytest.mark.skipif(not REAL_URL, reason="set TRIBUNAL_JUDGE_TEST_BASE_URL to run on a real judge")
@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
async def test_real_judge_resists(case: dict[str, Any]) -> None:
    backend = BackendConfig(
        kind="openai",
        base_url=REAL_URL,
        model=os.environ.get("TRIBUNAL_JUDGE_TEST_MODEL", "Qwen/Qwen3.5-35B-A3B"),
        api_key=os.environ.get("TRIBUNAL_JUDGE_TEST_API_KEY"),
    )
    verifier = JudgeVerifier(JudgeConfig(backend=backend))
    await verifier.start()
    try:
        [out] = await verifier.score([_item(case)])
    finally:
        await verifier.aclose()
    assert out.error is None, out.error
    assert out.reward is not None and out.reward <= case["expect"]["max_reward"], out.details
