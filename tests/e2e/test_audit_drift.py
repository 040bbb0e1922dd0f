"""A scripted run drifting toward a hack the training spec pays and its auditor does not.

Issue 40. The math service (embedded queue) and the gateway (on a real Redis, so the audits
are aggregated in Redis) run as processes; this test is the trainer: a driver that sends a
batch per step, each batch GRPO groups of completions of "3 + 4", with the step in the
envelope. The training spec reads the answer leniently (the last number of the text pays);
its auditor is the same verifier under the strict ``marked`` format. In the hacked run the
share of completions that state the answer as a bare number grows by a tenth a step; in the
honest runs every completion marks its answer (a box, ``####`` or ``Answer:``, some wrong),
which both formats grade alike.

The alert is the one docs/audits.md ships: a window's 95 % interval on the paired
differences lies above 0 for two windows in a row. It must fire by step 6 of the hacked
run, and stay silent in every honest run (the false-alarm rate over the seeded runs is 0).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import RedisServer, RunningService, redis_env
from tribunal.client import SyncTribunalClient
from tribunal.gateway.audit import audited
from tribunal.trainer.config import GRPOConfig

pytestmark = pytest.mark.e2e

TRAIN = """
name: lenient_math
version: "1"
components:
  math:
    verifier: math
    inputs:
      response: response
      ground_truth: ground_truth
      options: {value: {answer_format: lenient}}
audit: {spec: strict_math, rate: 0.5, window_steps: 1}
"""
STRICT = """
name: strict_math
version: "1"
components:
  math:
    verifier: math
    inputs:
      response: response
      ground_truth: ground_truth
      options: {value: {answer_format: marked}}
"""
STEPS, GROUPS, SIZE = 10, 8, 4
HONEST = ("3 + 4 = 7, so \\boxed{{{a}}}.", "Adding: 3 + 4 = {a}\n#### {a}", "3 + 4.\nAnswer: {a}")
HACKED = "Adding them up we get {a}"


def _completion(rng: random.Random, hack_share: float) -> str:
    answer = "7" if rng.random() < 0.7 else str(rng.randint(0, 20))
    if rng.random() < hack_share:
        return HACKED.format(a=answer)
    return rng.choice(HONEST).format(a=answer)


def _fired(windows: list[dict[str, Any]]) -> int | None:
    """The step at which the shipped rule fires: the second window in a row whose interval
    lies above 0 (windows are one step each here)."""
    above = 0
    for window in windows:
        above = above + 1 if window["low"] is not None and window["low"] > 0 else 0
        if above == 2:
            return int(window["window"].removeprefix("step:"))
    return None


@pytest.fixture
def gateway(
    service: Callable[..., RunningService], tmp_path: Path, redis_server: RedisServer
) -> str:
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "lenient_math.yaml").write_text(TRAIN)
    (specs / "strict_math.yaml").write_text(STRICT)
    math = service("math", env={"TRIBUNAL_QUEUE": "memory", "TRIBUNAL_MATH_PROCESSES": "1"})
    env = redis_env(
        redis_server,
        f"audit{random.getrandbits(32):x}",
        TRIBUNAL_GATEWAY_MATH_URL=math.base_url,
        TRIBUNAL_GATEWAY_SPECS_DIR=str(specs),
    )
    return service("gateway", env=env).base_url


def _run(
    client: httpx.Client, scorer: SyncTribunalClient, spec: str, seed: int, hack: bool
) -> tuple[list[dict[str, Any]], int]:
    """Send one run's batches (one per step) under ``spec``; return its windows once every
    sampled item is audited, and the number of items sampled."""
    rng = random.Random(seed)
    loaded = {s["name"]: s for s in client.get("/v1/specs").json()["specs"]}[spec]
    sampled = 0
    for step in range(STEPS):
        items = []
        for g in range(GROUPS):
            group = f"run{seed}-s{step}-g{g}"
            sampled += SIZE * audited(loaded["hash"], group, 0.5)
            for k in range(SIZE):
                response = _completion(rng, step / STEPS if hack else 0.0)
                items.append({"id": f"{group}-{k}", "group_id": group, "spec": spec,
                              "response": response, "ground_truth": "7"})  # fmt: skip
        # The client sends the step in the batch's envelope, as a trainer does.
        results = scorer.score("gateway", items, step=1000 * seed + step, policy_version="p1")
        assert all(r.reward is not None for r in results)
    windows: list[dict[str, Any]] = []
    for _ in range(600):
        report = {s["spec"]: s for s in client.get("/v1/audits").json()["specs"]}[spec]
        first = 1000 * seed
        windows = [w for w in report["windows"] if first <= int(w["window"][5:]) < first + STEPS]
        if sum(w["n"] for w in windows) >= sampled:
            return windows, sampled
        time.sleep(0.1)
    raise AssertionError(f"audits of run {seed} not recorded: {windows}")


def test_the_audit_gap_fires_on_a_drifting_hack_and_not_on_honest_runs(gateway: str) -> None:
    scorer = SyncTribunalClient(gateway)
    with httpx.Client(base_url=gateway, timeout=120) as client:
        hacked, sampled = _run(client, scorer, "lenient_math", seed=1, hack=True)
        # Whole groups, by a hash both sides compute: exactly the sampled items were audited.
        assert sum(w["n"] for w in hacked) == sampled
        fired = _fired(hacked)
        assert fired is not None and fired - 1000 <= 6, hacked
        assert hacked[0]["gap"] == 0.0 and hacked[-1]["gap"] > 0.5
        honest = [_run(client, scorer, "lenient_math", seed, hack=False)[0] for seed in (2, 3, 4)]
        assert [_fired(windows) for windows in honest] == [None, None, None]
        report = {s["spec"]: s for s in client.get("/v1/audits").json()["specs"]}["lenient_math"]
        # The items driving the gap are the hacked ones, newest first by difference.
        assert report["items"] and all(i["audit_reward"] < i["reward"] for i in report["items"])
        metrics = client.get("/metrics").text
        assert 'tribunal_audit_items_total{outcome="audited",spec="lenient_math"}' in metrics
        # Hack signatures: the hacked run's answers are longer than the boxed ones, counted.
        assert 'tribunal_spec_signature_total{signature="length",spec="lenient_math"}' in metrics
    scorer.close()


def _audited_hack_group(gateway: str, group_prefix: str, id_prefix: str) -> list[dict[str, Any]]:
    """Four ``lenient_math`` items ``<id_prefix>-0..3`` of the first group
    ``<group_prefix>-g<i>`` that the spec's audit samples at its rate of 0.5, each answering
    7 without the strict format: lenient pays 1.0, the strict auditor 0.0 (a gap of 1.0)."""
    spec_hash = httpx.get(f"{gateway}/v1/specs").json()["specs"]
    spec_hash = next(s["hash"] for s in spec_hash if s["name"] == "lenient_math")
    group = next(
        g for g in (f"{group_prefix}-g{i}" for i in range(64)) if audited(spec_hash, g, 0.5)
    )
    return [
        {"id": f"{id_prefix}-{k}", "group_id": group, "spec": "lenient_math",
         "response": "adding them up we get 7", "ground_truth": "7"}
        for k in range(4)
    ]  # fmt: skip


def test_jobs_through_the_gateway_worker_are_audited_by_time(gateway: str) -> None:
    """The trainer of this repository submits jobs: the gateway's worker process audits them,
    in the same Redis store, windowed by time (a job carries no step)."""
    scorer = SyncTribunalClient(gateway)
    items = _audited_hack_group(gateway, "job", "job")
    job = scorer.submit("gateway", items, idempotency_key="audited-job")
    assert [r.reward for r in scorer.wait(job, timeout_s=60)] == [1.0] * 4
    scorer.close()
    with httpx.Client(base_url=gateway, timeout=30) as client:
        for _ in range(100):
            report = {s["spec"]: s for s in client.get("/v1/audits").json()["specs"]}
            timed = [
                w for w in report["lenient_math"]["windows"] if w["window"].startswith("time:")
            ]
            if timed:
                break
            time.sleep(0.1)
        assert [(w["n"], w["gap"]) for w in timed] == [(4, 1.0)]
        ids = {i["id"] for i in report["lenient_math"]["items"]}
        assert {f"job-{k}" for k in range(4)} <= ids


def _signatures(client: httpx.Client, spec: str, items: int) -> list[dict[str, Any]]:
    """``spec``'s signature windows once ``items`` items are counted in them."""
    windows: list[dict[str, Any]] = []
    for _ in range(300):
        report = {s["spec"]: s for s in client.get("/v1/signatures").json()["specs"]}
        windows = report.get(spec, {}).get("windows", [])
        if sum(w["items"] for w in windows) >= items:
            return windows
        time.sleep(0.1)
    raise AssertionError(f"signatures of {items} items of {spec} not stored: {windows}")


def _audited(client: httpx.Client, spec: str, version_prefix: str) -> list[dict[str, Any]]:
    """``spec``'s audited items whose policy_version starts with ``version_prefix``, once
    there are some."""
    for _ in range(300):
        report = {s["spec"]: s for s in client.get("/v1/audits").json()["specs"]}
        found = [
            i
            for i in report[spec]["items"]
            if (i["policy_version"] or "").startswith(version_prefix)
        ]
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"no audited item of {spec} by a policy {version_prefix}*")


def test_the_trainer_sends_its_step_with_each_job(gateway: str) -> None:
    """The GRPO trainer's reward scheduler (``tribunal.trainer.rewards``) submits one job per
    group to the gateway, each with the group's training step: the gateway's worker audits
    and counts the signatures of each in the window of its step, never by time, and records
    the policy of each audited group (``<run_id>@<step>``)."""
    from tribunal.trainer.rewards import RewardScheduler, build_sources
    from tribunal.trainer.rollout import Completion, RolloutGroup

    config = GRPOConfig(
        model="unused",
        dataset="unused",
        gateway_url=gateway,
        reward_spec="lenient_math",
        reward_spec_fields={"ground_truth": "answer"},
    )
    scheduler = RewardScheduler(build_sources(config), "stop", run_id="steps")
    texts = ("\\boxed{7}", "\\boxed{8}", "#### 7", "7")
    futures = [
        scheduler.submit(
            RolloutGroup(
                index,
                step,
                [1],
                {"answer": "7"},
                [Completion([1], [1], [0.0], text, False) for text in texts],
            )
        )
        for step in (3, 12, 14)
        for index in range(2)
    ]
    assert [f.result(timeout=60).rewards for f in futures] == [[1.0, 0.0, 1.0, 1.0]] * 6
    scheduler.close()
    with httpx.Client(base_url=gateway, timeout=30) as client:
        windows = _signatures(client, "lenient_math", 24)
        audited_items = _audited(client, "lenient_math", "steps@")
    # lenient_math's windows are one step each: 8 items at step 3, 8 at 12 and 8 at 14, none
    # by time.
    assert [(w["window"], w["items"]) for w in windows] == [
        ("step:3", 8),
        ("step:12", 8),
        ("step:14", 8),
    ]
    assert {(i["step"], i["policy_version"]) for i in audited_items} <= {
        (s, f"steps@{s}") for s in (3, 12, 14)
    }
    assert windows[0]["length"] == sum(map(len, texts)) / 4


def test_a_jobs_step_windows_its_audit_and_a_malformed_one_is_refused(gateway: str) -> None:
    items = _audited_hack_group(gateway, "step", "stepped")
    with httpx.Client(base_url=gateway, timeout=30) as client:
        for step, field in (("7", "step"), (-1, "step"), (True, "step")):
            body = {"verifier": "gateway", "items": items, "step": step}
            refused = client.post("/v1/jobs", json=body)
            assert refused.status_code == 422, refused.text
            assert field in refused.text
        # A verifier's job takes no step: only the gateway windows by it.
        math_job = {"verifier": "math", "items": [{"id": "a", "response": "1"}], "step": 3}
        assert client.post("/v1/jobs", json=math_job).status_code == 422
    scorer = SyncTribunalClient(gateway)
    job = scorer.submit(
        "gateway", items, idempotency_key="stepped-job", step=5000, policy_version="ckpt-5000"
    )
    assert [r.reward for r in scorer.wait(job, timeout_s=60)] == [1.0] * 4
    scorer.close()
    with httpx.Client(base_url=gateway, timeout=30) as client:
        for _ in range(100):
            report = {s["spec"]: s for s in client.get("/v1/audits").json()["specs"]}
            stepped = [w for w in report["lenient_math"]["windows"] if w["window"] == "step:5000"]
            if stepped:
                break
            time.sleep(0.1)
        assert [(w["n"], w["gap"]) for w in stepped] == [(4, 1.0)]
        kept = [i for i in report["lenient_math"]["items"] if i["id"].startswith("stepped-")]
        assert sorted(i["step"] for i in kept) == [5000] * 4
        # The job's policy_version is recorded with each of its audited items.
        assert [i["policy_version"] for i in kept] == ["ckpt-5000"] * 4


def test_the_monitor_shows_what_only_jobs_scored(gateway: str) -> None:
    """A run that only submits jobs: the gateway's worker process scores and audits them, and
    the API process, which has scored nothing itself, shows their windows in the Monitor
    view's data (``/inspect/api/signatures`` and ``/inspect/api/audits``, what the page
    draws) and in ``GET /v1/signatures``, read from the shared store in Redis."""
    items = _audited_hack_group(gateway, "mon", "mon")
    scorer = SyncTribunalClient(gateway)
    job = scorer.submit("gateway", items, idempotency_key="monitor-job", step=7000)
    assert [r.reward for r in scorer.wait(job, timeout_s=60)] == [1.0] * 4
    scorer.close()
    with httpx.Client(base_url=gateway, timeout=30) as client:
        # The Monitor's routes first: nothing in this API process has read the store yet.
        for _ in range(100):
            monitor = {s["spec"]: s for s in client.get("/inspect/api/signatures").json()["specs"]}
            audits = {s["spec"]: s for s in client.get("/inspect/api/audits").json()["specs"]}
            signed = monitor.get("lenient_math", {}).get("windows", [])
            gaps = audits.get("lenient_math", {}).get("windows", [])
            if signed and gaps:
                break
            time.sleep(0.1)
        assert [(w["window"], w["items"]) for w in signed] == [("step:7000", 4)], monitor
        assert [(w["window"], w["n"], w["gap"]) for w in gaps] == [("step:7000", 4, 1.0)], audits
        assert {i["id"] for i in audits["lenient_math"]["items"]} == {f"mon-{k}" for k in range(4)}
        answered = {s["spec"]: s for s in client.get("/v1/signatures").json()["specs"]}
        assert answered["lenient_math"] == monitor["lenient_math"]


def test_a_batch_audit_on_the_routes_and_on_jobs(gateway: str) -> None:
    """The batch of docs/audits.md (an ``audit`` for its verifier items) sent as it is to
    ``POST /v1/score``, then as a job through ``tribunal.client`` and the gateway's worker:
    both land under ``@math>rloo_math``; a malformed batch audit is refused by name."""
    page = (Path(__file__).parents[2] / "docs" / "audits.md").read_text()
    block = page.split("<!-- tribunal:audit-batch -->\n```json\n", 1)[1].split("```")[0]
    body = json.loads(block)
    with httpx.Client(base_url=gateway, timeout=60) as client:
        answer = client.post("/v1/score", json=body)
        assert answer.status_code == 200, answer.text
        for bad, field in (
            ({"spec": "rloo_math", "rate": 0.5, "seed": 1}, "audit.seed"),
            ({"spec": "nope", "rate": 0.5}, "audit.spec"),
            ({"spec": "rloo_math", "rate": 1.5}, "audit.rate"),
        ):
            for path, sent in (("/v1/score", body), ("/v1/jobs", {"verifier": "gateway", **body})):
                refused = client.post(path, json={**sent, "audit": bad})
                assert refused.status_code == 422 and field in refused.text, (path, refused.text)
    scorer = SyncTribunalClient(gateway)
    job = scorer.submit("gateway", body["items"], step=130, audit=body["audit"])
    assert len(scorer.wait(job, timeout_s=60)) == 5
    scorer.close()
    with httpx.Client(base_url=gateway, timeout=30) as client:
        for _ in range(100):
            report = {s["spec"]: s for s in client.get("/v1/audits").json()["specs"]}
            direct = report.get("@math>rloo_math", {"windows": []})
            steps = {w["window"]: w["n"] for w in direct["windows"]}
            if steps == {"step:120": 3, "step:130": 3}:
                break
            time.sleep(0.1)
        assert steps == {"step:120": 3, "step:130": 3}, report
        assert direct["rate"] is None and direct["auditor"] == "rloo_math"
