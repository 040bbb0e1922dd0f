"""Worker processes and pool sizes from the cores (``tribunal.core.layout``), through the
services' settings as ``tribunal worker`` and ``tribunal up`` read them."""

from __future__ import annotations

import os

import pytest

from tribunal.code.settings import CodeSettings
from tribunal.core import layout
from tribunal.core.registry import load_service
from tribunal.math.settings import MathSettings


@pytest.mark.parametrize(
    ("cores", "workers", "per_worker"),
    [(1, 1, 1), (2, 1, 2), (4, 1, 4), (5, 2, 3), (8, 2, 4), (16, 4, 4), (64, 16, 4)],
)
def test_one_worker_per_four_cores_and_the_cores_shared_out(
    cores: int, workers: int, per_worker: int
) -> None:
    assert layout.default_workers(cores) == workers
    assert layout.cores_per_worker(workers, cores) == per_worker


def test_the_affinity_mask_is_what_counts() -> None:
    assert layout.available_cores() == len(os.sched_getaffinity(0))


@pytest.fixture
def sixteen_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("TRIBUNAL_"):
            monkeypatch.delenv(name)
    monkeypatch.setattr(layout, "available_cores", lambda: 16)


@pytest.mark.usefixtures("sixteen_cores")
def test_math_defaults_follow_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    math = MathSettings().math
    assert (math.workers, math.processes) == (4, 4)
    assert load_service("math").workers_of(MathSettings()) == 4
    monkeypatch.setenv("TRIBUNAL_MATH_WORKERS", "2")
    assert MathSettings().math.processes == 8
    monkeypatch.setenv("TRIBUNAL_MATH_PROCESSES", "3")
    assert (MathSettings().math.workers, MathSettings().math.processes) == (2, 3)


@pytest.mark.usefixtures("sixteen_cores")
def test_code_defaults_follow_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    code = CodeSettings().code
    assert (code.workers, code.slots, code.config().slots) == (4, 4, 4)
    monkeypatch.setenv("TRIBUNAL_CODE_WORKERS", "1")
    assert CodeSettings().code.config().slots == 16
    monkeypatch.setenv("TRIBUNAL_CODE_SLOTS", "0")  # 0 is the default, written out
    assert CodeSettings().code.slots == 16
    monkeypatch.setenv("TRIBUNAL_CODE_SLOTS", "3")
    assert CodeSettings().code.config().slots == 3


@pytest.mark.usefixtures("sixteen_cores")
def test_a_service_that_waits_on_io_runs_one_worker() -> None:
    spec = load_service("judge")
    assert spec.workers_of(spec.settings()) == 1


@pytest.mark.parametrize(
    ("cores", "processes"), [(1, 1), (2, 1), (8, 1), (15, 1), (16, 2), (64, 8)]
)
def test_one_api_process_per_eight_cores(cores: int, processes: int) -> None:
    assert layout.default_api_processes(cores) == processes
