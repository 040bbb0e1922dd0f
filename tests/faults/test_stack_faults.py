"""Faults while the trainer runs on the whole stack (bench/stack_faults.py's scenarios, three
steps each, the fault after the first): the workers of every verifier and of the gateway
SIGKILLed and started again, Redis restarted on its append-only file, the gateway's API
restarted, the judge's model slow and then down. No item is lost (every completion scored,
or its group dropped with the failure counted by class), the failure policy is applied, and a
stopped run names its cause.

The judge's model is the scripted OpenAI-compatible server standing in for vLLM (GPU only)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.stack_faults import (
    KILLS,
    FaultStack,
    fault_stack,
    judge_down,
    judge_slow,
    kill_workers,
    restart_gateway,
    restart_redis,
    run_trainer,
    trainer_config,
)
from tests.conftest import DATA, need_data
from tests.trainer.conftest import TRAINER_WARNINGS

pytestmark = [
    *TRAINER_WARNINGS,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed"),
]

# Failure classes a recovering fault may cause on the way (then retried): no answer, the
# queue away, or the gateway's remote call failing while a verifier restarts.
TRANSIENT = {"transport", "queue_unavailable", "http_503", "timeout"}


@pytest.fixture(scope="module")
def fs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultStack]:
    need_data(DATA / "research" / "scholarqa_cs_rubrics.json")
    with fault_stack(tmp_path_factory.mktemp("stack-faults")) as stack:
        yield stack


STEPS = 3


def assert_nothing_lost(run: dict[str, object], steps: int = STEPS) -> None:
    """The run finished, every completion of every step scored, nothing dropped."""
    assert run["stopped"] is None, run
    assert run["steps"] == steps and run["scored_fraction"] == [1.0] * steps, run
    assert run["dropped"] == 0, run
    assert set(run["failures"]) <= TRANSIENT, run  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("services", "spec"), KILLS, ids=lambda v: "-".join(v) if isinstance(v, tuple) else v
)
def test_killed_workers_lose_no_item(
    fs: FaultStack, services: tuple[str, ...], spec: str, tmp_path: Path
) -> None:
    # a seed per run: the same completions would be answered by the result caches
    seed = 100 + [s for s, _ in KILLS].index(services)
    raw = trainer_config(fs, spec, STEPS, "retry", seed)
    run = run_trainer(raw, tmp_path / "run", [(1, kill_workers(fs, *services))])
    [fault] = run["faults"]
    assert fault["killed"] == {f"{s}.worker0": -9 for s in services}
    assert_nothing_lost(run)


def test_redis_restarted_with_persistence_loses_no_item(fs: FaultStack, tmp_path: Path) -> None:
    raw = trainer_config(fs, "rloo_math", STEPS, "retry", seed=201)
    run = run_trainer(raw, tmp_path / "run", [(1, restart_redis(fs))])
    assert len(run["faults"]) == 1
    assert_nothing_lost(run)


def test_the_gateway_restarted_loses_no_item(fs: FaultStack, tmp_path: Path) -> None:
    raw = trainer_config(fs, "rloo_math", STEPS, "retry", seed=202)
    run = run_trainer(raw, tmp_path / "run", [(1, restart_gateway(fs))])
    assert run["faults"][0]["restarted"] == "gateway.api"
    assert_nothing_lost(run)


def test_the_judge_slow_then_down_stops_or_drops_as_configured(
    fs: FaultStack, tmp_path: Path
) -> None:
    # last in the module: the judge's model server is not started again
    raw = trainer_config(fs, "refiner_rubric_citation", 4, "stop", seed=203)
    stopped = run_trainer(raw, tmp_path / "stop", [(1, judge_slow(fs)), (2, judge_down(fs))])
    assert [f["after_step"] for f in stopped["faults"]] == [1, 2]
    # slow is not failed: the steps before the judge went down were all scored
    assert 2 <= stopped["steps"] < 4 and set(stopped["scored_fraction"]) == {1.0}, stopped
    message = stopped["stopped"]
    assert message is not None and "item_backend_unavailable" in message, stopped
    assert "source refiner_rubric_citation" in message and "judge" in message, message
    # the same outage under drop_group: every group leaves the loss, counted, and the run ends
    raw = trainer_config(fs, "refiner_rubric_citation", 2, "drop_group", seed=204)
    dropped = run_trainer(raw, tmp_path / "drop", [])
    assert dropped["stopped"] is None and dropped["steps"] == 2
    assert dropped["dropped"] == 4 and dropped["scored_fraction"] == [0.0, 0.0], dropped
    assert dropped["failures"] == {"item_backend_unavailable": 4}, dropped
