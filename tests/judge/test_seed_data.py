"""Real rubric data (ScholarQA-CS, DR Tulu-style traces) through validation, prompts, scoring."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conftest import DATA, need_data
from tribunal.judge.prompts import build_prompt, fence_tag
from tribunal.judge.testing.seed_data import drtulu_trace_records, scholarqa_records, seed_items
from tribunal.judge.verifier import JudgeVerifier
from tribunal.llm.testing import FakeOpenAIServer

ROOT = DATA / "research"


@pytest.fixture(autouse=True)
def _seed_data() -> None:
    need_data(ROOT)


def test_every_record_is_a_valid_item() -> None:
    sqa, traces = scholarqa_records(ROOT), drtulu_trace_records(ROOT)
    assert (len(sqa), len(traces)) == (100, 46)
    items = seed_items(ROOT)
    assert len(items) == 146
    rubrics = [r for item in items for r in item.instance_rubrics()]
    assert len(rubrics) == sum(len(r["rubrics"]) for r in sqa + traces)
    assert all(r.weight > 0 and r.text for r in rubrics)


@pytest.mark.slow
def test_every_record_builds_fenced_prompts() -> None:
    for item in seed_items(ROOT):
        tag = fence_tag(item.question, item.response)
        for rubric in item.instance_rubrics():
            prompt = build_prompt(item.question, item.response, [rubric])
            assert prompt.user.count(f"</response-{tag}>") == 1
            assert prompt.user.endswith("}}") and rubric.text in prompt.user[len(prompt.prefix) :]


async def test_seed_items_score_against_scripted_judge(
    openai_compat_server: FakeOpenAIServer, make_verifier: Callable[..., JudgeVerifier]
) -> None:
    openai_compat_server.script.hash_levels = True  # mixed 0/1/2 verdicts, deterministic
    openai_compat_server.record_bodies = False
    items = seed_items(ROOT)
    verifier = make_verifier(rubrics_per_call=4)
    await verifier.start()
    try:
        outs = await verifier.score(items)
    finally:
        await verifier.aclose()
    assert all(o.error is None for o in outs), [o.error for o in outs if o.error][:3]
    rewards = [o.reward for o in outs]
    assert all(r is not None and 0.0 <= r <= 1.0 for r in rewards)
    assert len(set(rewards)) > 10  # the mixed verdicts really moved the rewards
    for out in outs:
        for rubric in out.details["rubrics"]:
            assert 0.0 <= rubric["score"] <= 1.0 and rubric["verdict"]
