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
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from tests.conftest import ROOT, RedisServer
from tests.gateway.test_specs import ScriptedClient, const
from tribunal.client import TribunalClient
from tribunal.core.queue.keys import Keys
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
    window_of,
)
from tribunal.gateway.signatures import batch_signatures
from tribunal.gateway.specs import SHIPPED_DIR, Audit, load_specs
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
    audit = Audit(spec="strict", rate=0.5, window_steps=10, window_s=60.0)
    assert window_of(audit, 27, 0.0) == ("step:20", 20.0)
    assert window_of(audit, None, 125.0) == ("time:120", 120.0)


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
        ("s", "g", "the answer is 7", {}),
        ("s", "g", "the answer is 7", {}),  # the same completion again in its group
        ("s", "h", "the answer is 7", {}),  # the same text in another group: not a duplicate
        ("s", "h", "a b c d a b c d a b c d", {"sub_rewards": {"math": math_sub}}),
        ("t", "g", None, {}),
    ]
    counters = batch_signatures(rows)
    assert counters["sig|s|items"] == 4 and counters["sig|t|items"] == 1
    assert counters["sig|s|length"] == 15 * 3 + 23 and counters["sig|t|length"] == 0
    assert counters["sig|s|duplicate"] == 1_000_000
    assert counters["sig|s|repetition"] == round(5 / 9 * 1_000_000)
    assert counters["sig|s|uncommitted"] == counters["sig|s|no_region"] == 1_000_000
    assert counters["sig|t|uncommitted"] == 0


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
