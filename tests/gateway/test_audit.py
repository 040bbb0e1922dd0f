"""Audits (issue 40): group sampling, the gap's interval, the stores' bounds, the auditor's
failures.

The Redis store runs on the real Redis of the session; the gateway's verifiers are stood in
for by ``ScriptedClient`` (tests/gateway/test_specs.py), the whole stack in
tests/e2e/test_audit_drift.py.
"""

from __future__ import annotations

import math
import random
import statistics
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis
from pydantic import ValidationError

from tests.conftest import ROOT, RedisServer
from tests.gateway.test_specs import ScriptedClient, const
from tribunal.client import TribunalClient
from tribunal.core.metrics import _signature_tallies
from tribunal.core.queue.keys import Keys
from tribunal.core.queue.redis_streams import RedisStreamsQueue
from tribunal.core.request_models import job_request_model
from tribunal.gateway import GatewayVerifier, SpecError, load_spec_text
from tribunal.gateway import audit as audit_module
from tribunal.gateway.audit import (
    Auditor,
    AuditPair,
    AuditStore,
    MemoryAuditStore,
    RedisAuditStore,
    audited,
    gap_interval,
    report,
    signature_report,
    window_of,
)
from tribunal.gateway.signatures import batch_signatures
from tribunal.gateway.specs import SHIPPED_DIR, WINDOW_S, WINDOW_STEPS, Audit, load_specs
from tribunal.wire.envelope import VerifierInfo
from tribunal.wire.gateway import GatewayScoreRequest

TRAIN = """
name: train
version: "1"
components:
  math: {verifier: math, inputs: {response: response, ground_truth: ground_truth}}
audit: {spec: strict, rate: 1.0, window_steps: 5}
"""
STRICT = """
name: strict
version: "1"
components:
  math: {verifier: judge, inputs: {response: response, rubrics: {value: []}}}
"""


def test_sampling_is_per_group_deterministic_and_near_its_rate() -> None:
    groups = [f"g{i}" for i in range(4000)]
    chosen = [g for g in groups if audited("abcd", g, 0.05)]
    # Binomial(4000, 0.05): mean 200, sd 13.8; 5 sd either side.
    assert 131 <= len(chosen) <= 269
    assert chosen == [g for g in groups if audited("abcd", g, 0.05)]
    # Another spec hash draws another sample; rate 1 takes everything.
    assert chosen != [g for g in groups if audited("ef01", g, 0.05)]
    assert all(audited("abcd", g, 1.0) for g in groups)


def test_windows_by_step_or_by_time() -> None:
    assert window_of((10, 60.0), 27, 0.0) == ("step:20", 20.0)
    assert window_of((10, 60.0), None, 125.0) == ("time:120", 120.0)
    # A spec's windows are its audit's, else the defaults.
    assert load_spec_text(TRAIN).windows == (5, 60.0)
    assert load_spec_text(STRICT).windows == (WINDOW_STEPS, WINDOW_S) == (10, 60.0)


def test_the_gap_interval_is_a_normal_interval_on_paired_differences() -> None:
    rng = random.Random(7)
    pairs = [(float(rng.random() < 0.8), float(rng.random() < 0.5)) for _ in range(50)]
    diffs = [t - a for t, a in pairs]
    sums = {
        "n": 50.0,
        "t": sum(t for t, _ in pairs),
        "a": sum(a for _, a in pairs),
        "d": sum(diffs),
        "d2": sum(d * d for d in diffs),
    }
    gap = gap_interval(sums)
    half = 1.959963984540054 * statistics.stdev(diffs) / math.sqrt(50)
    assert gap.gap == pytest.approx(statistics.mean(diffs))
    assert gap.low == pytest.approx(gap.gap - half) and gap.high == pytest.approx(gap.gap + half)
    one = gap_interval({"n": 1.0, "t": 1.0, "a": 0.0, "d": 1.0, "d2": 1.0})
    assert (one.gap, one.low, one.high) == (1.0, None, None)
    with pytest.raises(ValueError, match="at least one pair"):
        gap_interval({"n": 0.0, "t": 0.0, "a": 0.0, "d": 0.0, "d2": 0.0})


def test_the_documented_audit_spec_loads_beside_the_shipped_specs(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "audits.md").read_text()
    block = page.split("<!-- tribunal:audit-spec -->\n```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "lenient_math.yaml").write_text(block)
    loaded = load_specs([SHIPPED_DIR, tmp_path])["lenient_math"]
    assert loaded.spec.audit == Audit(spec="rloo_math", rate=0.05, window_steps=10, window_s=60)
    envelope = page.split("<!-- tribunal:audit-envelope -->\n```json\n", 1)[1].split("```")[0]
    request = GatewayScoreRequest.model_validate_json(envelope)
    assert (request.step, request.policy_version) == (120, "ckpt-120")
    gateway = GatewayVerifier({"lenient_math": loaded}, lambda: ScriptedClient({}))
    gateway.item_model.model_validate(request.items[0])
    job = page.split("<!-- tribunal:audit-job -->\n```json\n", 1)[1].split("```")[0]
    body = job_request_model(gateway).model_validate_json(job)
    assert (body.step, body.policy_version) == (120, "ckpt-120")  # type: ignore[attr-defined]
    [item] = body.items  # type: ignore[attr-defined]
    assert gateway.at_step(item, body.step).trainer_step == 120  # type: ignore[attr-defined]


def test_the_documented_budget_loads_moves_no_hash_and_a_bad_one_is_refused() -> None:
    page = (ROOT / "docs" / "audits.md").read_text()
    block = page.split("<!-- tribunal:budget-spec -->\n```yaml\n", 1)[1].split("```", 1)[0]
    loaded = load_spec_text(block)
    assert loaded.spec.budget_usd == 25.0
    assert load_spec_text(block.replace("budget_usd: 25.0\n", "")).hash == loaded.hash
    for bad in ("0", "-1", ".nan", "ten"):
        with pytest.raises(SpecError, match="budget_usd"):
            load_spec_text(block.replace("25.0", bad))


async def test_the_documented_format_only_spec_and_signatures_answer() -> None:
    page = (ROOT / "docs" / "audits.md").read_text()
    block = page.split("<!-- tribunal:format-only-spec -->\n```yaml\n", 1)[1].split("```")[0]
    loaded = load_spec_text(block)
    assert loaded.format_terms == {"math": False, "tags": True}
    answer = page.split("<!-- tribunal:signatures-answer -->\n```json\n", 1)[1].split("```")[0]
    [documented] = orjson.loads(answer)["specs"]
    # The documented answer has the keys of a real one.
    client = ScriptedClient({"math": const(1.0)})
    gateway = GatewayVerifier({"tagged_math": loaded}, lambda: client)
    auditor = Auditor(gateway, MemoryAuditStore())
    raw = {"id": "a", "spec": "tagged_math", "response": "<answer>7</answer>", "ground_truth": "7"}
    items = [gateway.item_model.model_validate(raw)]
    auditor.after(items, await gateway.score_results(items, gateway_info()), step=0)
    await auditor.drain()
    [real] = await signature_report(gateway, auditor.store)
    assert set(real) == set(documented)
    assert set(real["windows"][0]) == set(documented["windows"][0])
    assert real["windows"][0]["format_share"] == pytest.approx(0.2 / 1.2, abs=1e-6)
    await gateway.aclose()


def test_an_audit_names_another_served_spec_and_moves_no_hash(
    tmp_path: Path,
) -> None:
    plain = load_spec_text(TRAIN.replace("audit: {spec: strict, rate: 1.0, window_steps: 5}", ""))
    assert load_spec_text(TRAIN).hash == plain.hash
    directory = tmp_path / "specs"
    directory.mkdir()
    (directory / "train.yaml").write_text(TRAIN)
    with pytest.raises(SpecError, match=r"audit\.spec: 'strict' is not another spec"):
        load_specs([directory])
    (directory / "strict.yaml").write_text(STRICT)
    assert load_specs([directory])["train"].spec.audit == Audit(
        spec="strict", rate=1.0, window_steps=5
    )
    with pytest.raises(SpecError, match=r"audit\.rate"):
        load_spec_text(TRAIN.replace("rate: 1.0", "rate: 0"))
    with pytest.raises(SpecError, match=r"audit\.every"):
        load_spec_text(TRAIN.replace("window_steps: 5", "every: 5"))


@pytest.fixture(params=["memory", "redis"])
async def store(
    request: pytest.FixtureRequest, redis_server: RedisServer
) -> AsyncIterator[AuditStore]:
    if request.param == "memory":
        yield MemoryAuditStore()
        return
    client = aioredis.from_url(redis_server.url)
    yield RedisAuditStore(client, Keys(f"t{uuid.uuid4().hex[:10]}"))
    await client.aclose()


async def test_a_store_keeps_its_newest_windows_and_items(
    store: AuditStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audit_module, "MAX_WINDOWS", 3)
    monkeypatch.setattr(audit_module, "MAX_ITEMS", 4)
    for step in range(5):
        pairs = [
            AuditPair(f"i{step}-{k}", f"g{step}", step, f"step:{step}", 1.0, k % 2)
            for k in range(2)
        ]
        await store.add("train", float(step), pairs)
    await store.add("train", 4.0, [AuditPair("late", "g", 4, "step:4", 0.5, 0.0)])
    windows = await store.windows("train")
    assert [w for w, _ in windows] == ["step:2", "step:3", "step:4"]
    assert windows[-1][1] == {"n": 3.0, "t": 2.5, "a": 1.0, "d": 1.5, "d2": 1.25}
    assert [p.id for p in await store.items("train")] == ["late", "i4-1", "i4-0", "i3-1"]
    assert await store.windows("other") == [] and await store.items("other") == []


async def test_a_store_keeps_its_newest_signature_windows(
    store: AuditStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audit_module, "MAX_WINDOWS", 3)
    for step in range(5):
        await store.add_signatures("train", f"step:{step}", float(step), {"items": 2, "length": 9})
    await store.add_signatures("train", "step:4", 4.0, {"items": 1, "length": 3, "duplicate": 7})
    windows = await store.signature_windows("train")
    assert [w for w, _ in windows] == ["step:2", "step:3", "step:4"]
    assert windows[-1][1] == {"items": 3, "length": 12, "duplicate": 7}
    assert await store.signature_windows("other") == []


async def test_the_auditor_records_pairs_after_the_answer_and_counts_failures() -> None:
    specs = {"train": load_spec_text(TRAIN), "strict": load_spec_text(STRICT)}
    client = ScriptedClient({"math": const(1.0), "judge": const(0.25)})
    gateway = GatewayVerifier(specs, lambda: client)
    auditor = Auditor(gateway, MemoryAuditStore())
    items = [
        gateway.item_model.model_validate(
            {"id": f"i{k}", "group_id": "g", "spec": "train", "response": "7", "ground_truth": "7"}
        )
        for k in range(3)
    ]
    texts = await gateway.score_results(items, gateway_info())
    calls = len(client.requests)
    auditor.after(items, texts, step=12)
    assert len(client.requests) == calls  # nothing was scored before the caller went on
    await auditor.drain()
    assert client.requests[-1][0] == "judge" and len(client.requests[-1][1]) == 3
    [(window, sums)] = await auditor.store.windows("train")
    assert window == "step:10" and sums["n"] == 3 and sums["d"] == pytest.approx(2.25)
    stats = auditor.take_stats()
    assert stats["audit|train|items"] == 3 and "audit|train|failed" not in stats
    # Every spec item's hack signatures were counted too, off the event loop.
    assert stats["sig|train|items"] == 3 and stats["sig|train|duplicate"] == 2_000_000

    client.down.add("judge")
    auditor.after(items, texts, step=13)
    await auditor.drain()
    assert auditor.take_stats()["audit|train|failed"] == 3
    assert (await auditor.store.windows("train"))[0][1]["n"] == 3

    bounded = Auditor(gateway, MemoryAuditStore(), max_pending_items=2)
    bounded.after(items, texts, step=14)
    await bounded.drain()
    assert bounded.take_stats() == {
        "audit|train|dropped": 3,
        "audit|train|signatures_dropped": 3,
    }
    await gateway.aclose()


def gateway_info() -> VerifierInfo:

    return VerifierInfo(name="gateway", version="1", config_hash="0" * 16)


async def test_the_client_sends_a_step_only_to_the_gateway() -> None:
    client = TribunalClient("http://127.0.0.1:9")
    with pytest.raises(ValueError, match="step: only the gateway"):
        await client.score("math", [{"id": "a", "response": "1", "ground_truth": "1"}], step=3)
    await client.aclose()


def test_signatures_of_a_batch() -> None:
    math_sub = {"source": "math", "details": {"uncommitted": "multiple", "region": None}}
    rows = [
        ("s", "g", "the answer is 7", {}, "step:0", 0.0),
        ("s", "g", "the answer is 7", {}, "step:0", 0.0),  # the same completion in its group
        ("s", "h", "the answer is 7", {}, "step:10", 10.0),  # another group: no duplicate
        ("s", "h", "a b c d a b c d a b c d", {"sub_rewards": {"math": math_sub}}, "step:10", 10.0),
        ("t", "g", None, {}, "time:60", 60.0),
    ]
    tally = batch_signatures(rows)
    counters = tally.counters
    assert counters["sig|s|items"] == 4 and counters["sig|t|items"] == 1
    assert counters["sig|s|length"] == 15 * 3 + 23 and counters["sig|t|length"] == 0
    assert counters["sig|s|duplicate"] == 1_000_000
    assert counters["sig|s|repetition"] == round(5 / 9 * 1_000_000)
    assert counters["sig|s|uncommitted"] == counters["sig|s|no_region"] == 1_000_000
    assert counters["sig|t|uncommitted"] == 0
    # The same sums per window, which the prefix-free names of the store carry.
    assert list(tally.windows) == [("s", "step:0"), ("s", "step:10"), ("t", "time:60")]
    order, first = tally.windows[("s", "step:0")]
    assert order == 0.0 and first["items"] == 2 and first["duplicate"] == 1_000_000
    assert tally.windows[("s", "step:10")][1]["uncommitted"] == 1_000_000
    assert "format_share" not in first  # no format-only component declared


async def test_specs_auditing_each_other_audit_once_on_the_jobs_path() -> None:
    strict = load_spec_text(STRICT + "audit: {spec: train, rate: 1.0}\n")
    specs = {"train": load_spec_text(TRAIN), "strict": strict}
    client = ScriptedClient({"math": const(1.0), "judge": const(0.0)})
    gateway = GatewayVerifier(specs, lambda: client)
    gateway._audits_jobs = True  # as attach_queue sets it in the gateway's worker
    gateway.auditor = Auditor(gateway, MemoryAuditStore())
    item = gateway.item_model.model_validate(
        {"id": "a", "spec": "train", "response": "7", "ground_truth": "7"}
    )
    await gateway.score([item])
    await gateway.auditor.drain()
    # One request for the item (math), one for its audit (judge): the audit is not audited.
    assert [verifier for verifier, _ in client.requests] == ["math", "judge"]
    [(window, sums)] = await gateway.auditor.store.windows("train")
    assert window.startswith("time:") and sums["n"] == 1 and sums["d"] == 1.0
    await gateway.aclose()


FORMATTED = """
name: formatted
version: "1"
components:
  answer: {verifier: math, inputs: {response: response, ground_truth: ground_truth}}
  tags:
    builtin: contains
    params: {all_of: ["<answer>"]}
    weight: 0.5
    format_only: true
  shown:
    builtin: contains
    params: {all_of: ["<think>"]}
    gate: {threshold: 1.0, reward: 0.0}
"""


def test_format_only_moves_no_hash_and_is_refused_where_no_share_exists() -> None:
    loaded = load_spec_text(FORMATTED)
    plain = load_spec_text(FORMATTED.replace("    format_only: true\n", ""))
    assert loaded.hash == plain.hash
    # The gate pays nothing itself: it is not among the summed components.
    assert loaded.format_terms == {"answer": False, "tags": True}
    assert plain.format_terms is None
    with pytest.raises(SpecError, match=r"components\.tags\.format_only: needs combine"):
        load_spec_text(FORMATTED + "formula: answer + tags\n")
    with pytest.raises(SpecError, match=r"components\.tags\.format_only: needs combine"):
        load_spec_text(FORMATTED.replace("weight: 0.5", "weight: 1.0") + "combine: min\n")
    gated = FORMATTED.replace("    gate: {threshold", "    format_only: true\n    gate: {threshold")
    with pytest.raises(SpecError, match=r"components\.shown\.format_only: a gate pays nothing"):
        load_spec_text(gated)


async def test_the_format_share_per_item_and_per_step_window() -> None:
    """Items paid by the tags alone (a wrong answer in tags) have a share of 1, a right answer
    in tags 0.5 / 1.5, an unpaid item 0; each item in the window of its own step."""
    specs = {"formatted": load_spec_text(FORMATTED)}
    right = {"7"}
    client = ScriptedClient({"math": lambda item: (float(item["ground_truth"] in right), None)})
    gateway = GatewayVerifier(specs, lambda: client)
    store = MemoryAuditStore()
    auditor = Auditor(gateway, store)

    def item(k: int, response: str, truth: str, **extra: int) -> Any:
        return gateway.item_model.model_validate(
            {"id": f"i{k}", "group_id": f"g{k}", "spec": "formatted",
             "response": response, "ground_truth": truth, **extra}
        )  # fmt: skip

    items = [
        item(0, "<think>x</think><answer>8</answer>", "8"),  # tags only: share 1
        item(1, "<think>x</think><answer>7</answer>", "7"),  # both: 0.5 / 1.5
        item(2, "<think>x</think> no tags", "8"),  # nothing paid: 0
        item(3, "<think>x</think><answer>8</answer>", "8", trainer_step=31),  # its own step
    ]
    texts = await gateway.score_results(items, gateway_info())
    assert [orjson.loads(t)["reward"] for t in texts] == [0.5, 1.5, 0.0, 0.5]
    auditor.after(items, texts, step=12, now_s=1000.0)
    await auditor.drain()
    stats = auditor.take_stats()
    assert stats["sig|formatted|items"] == 4
    assert stats["sig|formatted|format_share"] == 1_000_000 + round(1e6 / 3) + 0 + 1_000_000
    windows = dict(await store.signature_windows("formatted"))
    assert list(windows) == ["step:10", "step:30"]
    assert windows["step:10"]["items"] == 3 and windows["step:30"]["items"] == 1
    assert windows["step:10"]["format_share"] == 1_000_000 + round(1e6 / 3)
    [report] = await signature_report(gateway, store)
    assert (report["spec"], report["window_steps"], report["window_s"]) == ("formatted", 10, 60.0)
    first, second = report["windows"]
    assert first["window"] == "step:10" and first["items"] == 3
    assert first["format_share"] == pytest.approx((1 + 1 / 3) / 3, abs=1e-6)
    assert second["format_share"] == 1.0 and second["length"] == len(items[3].response)
    await gateway.aclose()


async def test_items_are_windowed_by_their_own_step_else_the_batchs_else_time() -> None:
    specs = {"train": load_spec_text(TRAIN), "strict": load_spec_text(STRICT)}
    client = ScriptedClient({"math": const(1.0), "judge": const(0.0)})
    gateway = GatewayVerifier(specs, lambda: client)
    auditor = Auditor(gateway, MemoryAuditStore())
    raw = [
        {"id": "a", "group_id": "g", "spec": "train", "response": "7", "ground_truth": "7"},
        {"id": "b", "group_id": "g", "spec": "train", "response": "7", "ground_truth": "7",
         "trainer_step": 7, "policy_version": "own"},
        {"id": "c", "group_id": "h", "spec": "train", "response": "7", "ground_truth": "7",
         "trainer_step": 12},
    ]  # fmt: skip
    items = [gateway.item_model.model_validate(r) for r in raw]
    texts = await gateway.score_results(items, gateway_info())
    # `a` and `c` take the batch's step (`c` its policy too), `b` keeps its own.
    auditor.after(items, texts, step=3, now_s=1000.0, policy_version="p3")
    auditor.after(items[:1], texts[:1], step=None, now_s=1000.0)  # no step at all: time
    await auditor.drain()
    windows = await auditor.store.windows("train")
    assert [(w, s["n"]) for w, s in windows] == [
        ("step:0", 1),
        ("step:5", 1),
        ("step:10", 1),
        ("time:960", 1),
    ]
    signed = await auditor.store.signature_windows("train")
    assert [(w, s["items"]) for w, s in signed] == [
        ("step:0", 1),
        ("step:5", 1),
        ("step:10", 1),
        ("time:960", 1),
    ]
    pairs = sorted(
        (p.id, str(p.step), p.policy_version) for p in await auditor.store.items("train")
    )
    assert pairs == [("a", "3", "p3"), ("a", "None", None), ("b", "7", "own"), ("c", "12", "p3")]
    # A step is an integer >= 0 (the item's own, a batch's): anything else is refused, named.
    with pytest.raises(ValidationError, match="trainer_step"):
        gateway.item_model.model_validate({**raw[0], "trainer_step": -1})
    with pytest.raises(ValidationError, match="step"):
        GatewayScoreRequest.model_validate({"items": raw, "step": "seven"})
    # The trainer's step is never a rollout field (a spec cannot read it, an audit not send it).
    assert "trainer_step" not in items[1].fields() and "policy_version" not in items[1].fields()
    assert gateway.at_step(items[0], 40).trainer_step == 40
    assert gateway.at_step(items[1], 40).trainer_step == 7
    assert gateway.at_step(items[0], None, "v").policy_version == "v"
    assert gateway.at_step(items[1], None, "v").policy_version == "own"
    await gateway.aclose()


JUDGED = """
name: judged
version: "1"
budget_usd: 0.001
components:
  judge: {verifier: judge, inputs: {response: response, rubrics: {value: []}}}
"""


class PricedJudge(ScriptedClient):
    """A judge whose every item cost 0.0003 USD (its ``details.usage``, as a priced judge's)."""

    async def score(self, verifier: str, items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        results = await super().score(verifier, items)
        for result in results:
            result["details"]["usage"] = {"calls": 1, "cost_usd": 0.0003}
        return results


async def test_judge_cost_per_spec_and_window_and_a_budget_spent_across_two_workers(
    redis_server: RedisServer, key_prefix: str
) -> None:
    """Two gateway workers on one real Redis: each item's judge cost is summed per spec (the
    counter both add to) and per step window; once the spend reaches the spec's budget, both
    answer its items budget_spent, unscored."""
    queue = RedisStreamsQueue(
        redis_server.url, Keys(key_prefix), max_queue_items=100, result_ttl_s=60,
        visibility_timeout_s=5.0,
    )  # fmt: skip
    clients = [PricedJudge({"judge": const(1.0)}) for _ in range(2)]
    workers = [GatewayVerifier({"judged": load_spec_text(JUDGED)}, lambda c=c: c) for c in clients]
    for worker in workers:
        worker.attach_queue(queue, 10.0)

    def batch(name: str, step: int) -> list[Any]:
        return [
            workers[0].item_model.model_validate(
                {"id": f"{name}{k}", "spec": "judged", "response": "x", "trainer_step": step}
            )
            for k in range(2)
        ]

    for worker, step in zip(workers, (3, 12), strict=True):  # 4 items: 0.0012 USD
        assert [o.reward for o in await worker.score(batch(f"s{step}-", step))] == [1.0, 1.0]
        assert worker.auditor is not None
        await worker.auditor.drain()
    stats = await queue.stats("gateway")
    assert stats["cost|judged|usd"] == 1_200_000  # nano-dollars
    [cost, _] = [m for m in _signature_tallies({"gateway": stats}) if "cost" in m.name]
    assert [(s.labels, s.value) for s in cost.samples] == [({"spec": "judged"}, 0.0012)]
    assert workers[0].auditor is not None
    [report] = await signature_report(workers[0], workers[0].auditor.store, {"judged": 0.0012})
    assert (report["cost_usd"], report["budget_usd"]) == (0.0012, 0.001)
    assert [(w["window"], w["cost_usd"]) for w in report["windows"]] == [
        ("step:0", pytest.approx(0.0006)),
        ("step:10", pytest.approx(0.0006)),
    ]
    # The budget is spent: either worker answers the next batch's items budget_spent, and
    # sends nothing to the judge.
    sent = [len(c.requests) for c in clients]
    for worker in workers:
        outcomes = await worker.score(batch("late", 20))
        assert all(o.reward is None and o.error is not None for o in outcomes)
        assert {o.error.code for o in outcomes if o.error} == {"budget_spent"}
        assert "'judged' spent $0.0012 of its budget_usd $0.001" in str(outcomes[0].error)
    assert [len(c.requests) for c in clients] == sent
    for worker in workers:
        await worker.aclose()
    await queue.aclose()


CITED = """
name: cited
version: "1"
components:
  cite:
    verifier: citation
    inputs: {response: response, evidence: evidence, question: question}
"""
TOOLED = """
name: tooled
version: "1"
components:
  ran: {builtin: contains, params: {all_of: ["<tool_response>"]}}
"""


class LexicalCitation(ScriptedClient):
    """The real citation verifier (lexical support mode, its scoring processes started)."""

    async def score(self, verifier: str, items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        from tests.citation.started import score_started
        from tribunal.citation.config import CitationConfig
        from tribunal.citation.verifier import CitationVerifier
        from tribunal.wire.citation import CitationItem

        self.requests.append((verifier, list(items)))
        scorer = CitationVerifier(CitationConfig(support="lexical"))
        outcomes = await score_started(scorer, [CitationItem(**item) for item in items])
        return [
            {
                "id": item["id"],
                "reward": o.reward,
                "details": o.details,
                "error": None,
                "verifier": {"name": "citation", "version": "1", "config_hash": "0" * 16},
            }
            for item, o in zip(items, outcomes, strict=True)
        ]


async def test_unused_tool_outputs_and_duplicate_or_uncited_claims_per_window() -> None:
    """A tool output whose new words the policy never writes again is unused; the citation
    scorer's claims set aside as duplicates, or carrying no citation, are counted from its
    own details (the real verifier, lexical mode)."""
    specs = {"cited": load_spec_text(CITED), "tooled": load_spec_text(TOOLED)}
    gateway = GatewayVerifier(specs, lambda: LexicalCitation({}))
    auditor = Auditor(gateway, MemoryAuditStore())
    evidence = {"S2": "Tumour growth rate at least doubled in patients with hyperprogression."}
    claim = "<cite id=S2>Tumour growth rate at least doubled in patients with hyperprogression."
    call = "<tool_call>{'name': 'python', 'arguments': '17 * 23'}</tool_call><|im_end|>"
    raw = [
        {"id": "c1", "spec": "cited", "question": "What happens to tumour growth?",
         "evidence": evidence, "response": f"<answer>{claim}</cite></answer>"},
        # The same claim twice, and a sentence with no citation: 3 claims.
        {"id": "c2", "spec": "cited", "question": "What happens to tumour growth?",
         "evidence": evidence, "response": f"<answer>{claim}</cite> {claim}</cite> "
         "Doctors in Lyon saw 40 cases in 2019.</answer>"},
        {"id": "t1", "spec": "tooled", "response": f"{call}<tool_response>391</tool_response>"
         "<|im_start|>assistant So the product is 391."},
        {"id": "t2", "spec": "tooled", "response": f"{call}<tool_response>391</tool_response>"
         "<|im_start|>assistant So the product is 400."},
        {"id": "t3", "spec": "tooled", "response": "No tool: 391."},
    ]  # fmt: skip
    items = [gateway.item_model.model_validate(r) for r in raw]
    texts = await gateway.score_results(items, gateway_info())
    claims = [
        [(c["cited"], c["gate"]) for c in orjson.loads(t)["details"]["sub_rewards"]["cite"][
            "details"]["claims"]]
        for t in texts[:2]
    ]  # fmt: skip
    assert claims == [[(True, None)], [(True, None), (True, "duplicate"), (False, None)]]
    auditor.after(items, texts, step=0)
    await auditor.drain()
    stats = auditor.take_stats()
    assert stats["sig|cited|claim_duplicate"] == round(1e6 / 3)
    assert stats["sig|cited|claim_uncited"] == round(1e6 / 3)
    assert stats["sig|tooled|unused_tools"] == 1_000_000  # t2 of t1, t2 (t3 has no output)
    assert "sig|tooled|claim_duplicate" not in stats  # no citation component
    report = {r["spec"]: r for r in await signature_report(gateway, auditor.store)}
    [tooled] = report["tooled"]["windows"]
    assert tooled["unused_tools"] == pytest.approx(1 / 3, abs=1e-6)
    [cited] = report["cited"]["windows"]
    assert cited["claim_duplicate"] == pytest.approx(1 / 6, abs=1e-6)
    assert cited["claim_uncited"] == pytest.approx(1 / 6, abs=1e-6)
    assert cited["unused_tools"] == 0.0
    await gateway.aclose()


async def test_a_direct_verifier_item_names_its_auditor() -> None:
    """Direct math items naming the judge-scored `strict` spec as auditor: the sampled groups
    are scored again under it, aggregated as ``@math>strict``; the verifier never sees the
    field, and a spec item (audited as its spec says) or an unknown auditor is refused."""
    specs = {"train": load_spec_text(TRAIN), "strict": load_spec_text(STRICT)}
    client = ScriptedClient({"math": const(1.0), "judge": const(0.0)})
    gateway = GatewayVerifier(specs, lambda: client)
    auditor = Auditor(gateway, MemoryAuditStore())
    page = (ROOT / "docs" / "audits.md").read_text()
    block = page.split("<!-- tribunal:audit-direct -->\n```json\n", 1)[1].split("```")[0]
    documented = GatewayScoreRequest.model_validate_json(block).items[0]
    with_shipped = GatewayVerifier(load_specs([SHIPPED_DIR]), lambda: client)
    assert with_shipped.item_model.model_validate(documented).audit.spec == "rloo_math"  # type: ignore[attr-defined]
    audit = {"spec": "strict", "rate": 1.0}
    raw = [
        {"id": f"d{k}", "group_id": "g", "verifier": "math", "response": "7",
         "ground_truth": "7", "audit": audit}
        for k in range(2)
    ] + [{"id": "plain", "verifier": "math", "response": "7", "ground_truth": "7"}]  # fmt: skip
    items = [gateway.item_model.model_validate(r) for r in raw]
    texts = await gateway.score_results(items, gateway_info())
    auditor.after(items, texts, step=4, policy_version="p4")
    await auditor.drain()
    assert all("audit" not in sent for _, batch in client.requests for sent in batch)
    assert [v for v, _ in client.requests] == ["math", "judge"]  # `plain` names no auditor
    audits = {r["spec"]: r for r in await report(gateway, auditor.store)}
    assert set(audits) == {"train", "@math>strict"}  # the audited spec, and the direct items'
    direct = audits["@math>strict"]
    assert (direct["spec"], direct["auditor"], direct["rate"]) == ("@math>strict", "strict", None)
    [window] = direct["windows"]
    assert (window["window"], window["n"], window["gap"]) == ("step:0", 2, 1.0)
    assert {(i["id"], i["policy_version"]) for i in direct["items"]} == {
        ("d0", "p4"),
        ("d1", "p4"),
    }
    assert auditor.take_stats()["audit|@math>strict|items"] == 2
    with pytest.raises(ValidationError, match="only a `verifier` item"):
        gateway.item_model.model_validate({**raw[0], "verifier": None, "spec": "train"})
    with pytest.raises(ValidationError, match=r"audit\.spec: unknown spec 'nope'"):
        gateway.item_model.model_validate({**raw[0], "audit": {"spec": "nope", "rate": 0.5}})
    with pytest.raises(ValidationError, match="rate"):
        gateway.item_model.model_validate({**raw[0], "audit": {"spec": "strict", "rate": 0}})
    await gateway.aclose()


def _documented_batch() -> dict[str, Any]:
    page = (ROOT / "docs" / "audits.md").read_text()
    block = page.split("<!-- tribunal:audit-batch -->\n```json\n", 1)[1].split("```")[0]
    body: dict[str, Any] = orjson.loads(block)
    return body


async def test_a_batch_names_the_auditor_of_its_verifier_items() -> None:
    """The documented batch: its ``audit`` goes to the verifier items that name none (an
    item's own wins, a spec item is audited as its spec says), sampled per group, on the
    synchronous path (``Auditor.after``) and on the jobs path (``at_step``, then the worker's
    ``score``); a malformed batch audit is refused by name."""
    body = _documented_batch()
    request = GatewayScoreRequest.model_validate(body)
    assert request.audit is not None and (request.audit.spec, request.audit.rate) == (
        "rloo_math",
        0.5,
    )
    sampled = {
        g: audited(audit_module.direct_name("math", "rloo_math"), g, 0.5)
        for g in ("g2", "g3", "g4")
    }
    assert sampled == {"g2": True, "g3": False, "g4": False}  # what the page says of them
    client = ScriptedClient({"math": const(1.0)})
    gateway = GatewayVerifier(load_specs([SHIPPED_DIR]), lambda: client)
    auditor = Auditor(gateway, MemoryAuditStore())
    items = [gateway.item_model.model_validate(raw) for raw in request.items]
    texts = await gateway.score_results(items, gateway_info())
    auditor.after(items, texts, step=request.step, audit=request.audit)
    await auditor.drain()
    audits = {r["spec"]: r for r in await report(gateway, auditor.store)}
    assert set(audits) == {"@math>rloo_math"}  # rloo_math itself has no audit
    [window] = audits["@math>rloo_math"]["windows"]
    assert (window["window"], window["n"]) == ("step:120", 3)
    audited_ids = {p.id for p in await auditor.store.items("@math>rloo_math")}
    assert audited_ids == {"a", "b", "c"}
    # A job: the batch's audit is given to each item before it is queued, then the worker's
    # scoring audits it (steps in another window, to tell them apart).
    job = job_request_model(gateway).model_validate({"verifier": "gateway", **body, "step": 130})
    queued = [
        gateway.at_step(i, job.step, None, job.audit)  # type: ignore[attr-defined]
        for i in job.items  # type: ignore[attr-defined]
    ]
    assert [getattr(i, "audit", None) is not None for i in queued] == [True] * 4 + [False]
    assert queued[2].audit.rate == 1.0  # type: ignore[attr-defined]  # its own wins
    worker = GatewayVerifier(load_specs([SHIPPED_DIR]), lambda: client)
    worker._audits_jobs = True  # as attach_queue sets it in the gateway's worker
    worker.auditor = Auditor(worker, auditor.store)
    await worker.score(queued)
    await worker.auditor.drain()
    audits = {r["spec"]: r for r in await report(worker, auditor.store)}
    steps = {w["window"]: w["n"] for w in audits["@math>rloo_math"]["windows"]}
    assert steps == {"step:120": 3, "step:130": 3}
    # Refusals, by name: an unknown key, an unserved spec (the job's model knows the specs;
    # the synchronous route checks it as ``audit.spec``), a rate outside (0, 1].
    for bad, field in (
        ({"spec": "rloo_math", "rate": 0.5, "seed": 1}, "audit.seed"),
        ({"spec": "nope", "rate": 0.5}, "audit.spec"),
        ({"spec": "rloo_math", "rate": 0}, "audit.rate"),
    ):
        with pytest.raises(ValidationError, match=field.replace(".", r"\.")):
            job_request_model(gateway).model_validate({"verifier": "gateway", **body, "audit": bad})
        if field != "audit.spec":
            with pytest.raises(ValidationError, match=field.replace(".", r"\.")):
                GatewayScoreRequest.model_validate({**body, "audit": bad})
    await gateway.aclose()
    await worker.aclose()


async def test_the_client_sends_a_batch_audit_only_to_the_gateway() -> None:
    client = TribunalClient("http://127.0.0.1:9")
    audit = {"spec": "rloo_math", "rate": 0.05}
    item = {"id": "a", "response": "1", "ground_truth": "1"}
    with pytest.raises(ValueError, match="audit: only the gateway"):
        await client.score("math", [item], audit=audit)
    with pytest.raises(ValueError, match="audit: only the gateway"):
        await client.submit("math", [item], audit=audit)
    with pytest.raises(TypeError, match="audit: a dict or an ItemAudit"):
        await client.score("gateway", [item], audit="rloo_math")  # type: ignore[arg-type]
    await client.aclose()
