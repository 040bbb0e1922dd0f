"""The benchmark runner (``python -m bench``): its registry covers every benchmark, a plain run
never rewrites the committed results, and every quick run still runs (so none rots).

The quick runs are real: each starts its benchmark as ``python -m bench run NAME --quick``
with its services, Redis and sandboxes, and its result goes into the test's folder
(``TRIBUNAL_BENCH_RESULTS``), never over ``bench/results/``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench import results, stats
from bench.__main__ import environment, main
from bench.registry import BENCHMARKS, BY_NAME, Benchmark
from tests.conftest import ROOT

HELPERS = {"__init__", "__main__", "registry", "results", "stats", "_stack", "noop", "raw_loop"}
HELPERS |= {"fault_scenarios", "citation_data", "code_data", "training_data"}
HELPERS |= {"containers", "math_mutations", "reasoning_outputs", "protocol_passes"}
"""The modules of ``bench/`` that are not benchmarks (the registry's docstring names them)."""

DOCS = [ROOT / "docs" / "benchmarks.md", ROOT / "docs" / "development.md"]


def bench(*argv: str, tmp_path: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """``python -m bench ARGV`` from the repository root, recording into ``tmp_path``."""
    env = {**os.environ, "TRIBUNAL_BENCH_RESULTS": str(tmp_path)}
    env.pop("TRIBUNAL_BENCH_RECORD", None)
    return subprocess.run(
        [sys.executable, "-m", "bench", *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_every_benchmark_module_is_registered_and_every_entry_is_a_module() -> None:
    modules = {path.stem for path in (ROOT / "bench").glob("*.py")} - HELPERS
    assert modules == set(BY_NAME)
    for benchmark in BENCHMARKS:
        assert not (benchmark.slow and benchmark.needs), benchmark.name
        assert not (benchmark.slow and benchmark.quick), benchmark.name


def test_list_prints_each_benchmark_with_its_purpose(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == [b.name for b in BENCHMARKS]
    by_name = dict(zip((b.name for b in BENCHMARKS), lines, strict=True))
    assert "Boundedness, not faults" in by_name["soak"]
    assert "[no quick run: " in by_name["math_fidelity"]
    assert "[needs a CUDA GPU]" in by_name["trainer_gpu"]


def test_a_quick_run_of_a_benchmark_without_one_is_refused_with_the_reason(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", "stack_faults", "--quick"]) == 2
    error = capsys.readouterr().err
    assert "stack_faults has no quick run" in error and "DeepSpeed" in error


def test_an_unknown_benchmark_or_option_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as unknown:
        main(["run", "nope"])
    assert unknown.value.code == 2
    assert "invalid choice: 'nope'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["run", "soak", "--fast"])
    assert "unrecognized arguments: --fast" in capsys.readouterr().err


def test_a_plain_run_writes_into_a_temporary_folder_and_a_recorded_one_where_the_docs_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TRIBUNAL_BENCH_RESULTS", raising=False)
    monkeypatch.delenv("TRIBUNAL_BENCH_RECORD", raising=False)
    before = sorted((p.name, p.stat().st_mtime_ns) for p in results.RESULTS.iterdir())
    path = results.record("runner_test", {"x": 1}, [results.table(["a"], [[1]])])
    assert path.parent != results.RESULTS and json.loads(path.read_text())["report"] == {"x": 1}
    assert sorted((p.name, p.stat().st_mtime_ns) for p in results.RESULTS.iterdir()) == before
    assert results.folder(asked=True) == results.RESULTS
    monkeypatch.setenv("TRIBUNAL_BENCH_RECORD", "1")
    assert results.folder() == results.RESULTS
    monkeypatch.setenv("TRIBUNAL_BENCH_RECORD", "yes")
    with pytest.raises(ValueError, match="TRIBUNAL_BENCH_RECORD must be 0 or 1, not 'yes'"):
        results.folder()
    monkeypatch.setenv("TRIBUNAL_BENCH_RESULTS", "/elsewhere")
    assert results.folder(asked=True) == Path("/elsewhere")


def test_a_run_asked_to_record_is_told_to(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRIBUNAL_BENCH_RECORD", raising=False)
    assert "TRIBUNAL_BENCH_RECORD" not in environment(record=False)
    assert environment(record=True)["TRIBUNAL_BENCH_RECORD"] == "1"
    monkeypatch.setenv("TRIBUNAL_BENCH_RECORD", "0")
    assert environment(record=False)["TRIBUNAL_BENCH_RECORD"] == "0"
    assert environment(record=True)["TRIBUNAL_BENCH_RECORD"] == "1"
    monkeypatch.setenv("TRIBUNAL_BENCH_RESULTS", "/elsewhere")
    assert environment(record=True)["TRIBUNAL_BENCH_RESULTS"] == "/elsewhere"


def test_percentile_is_the_nearest_rank_from_above() -> None:
    values = [float(v) for v in range(100, 0, -1)]
    assert stats.percentile(values, 0.5) == 51.0
    assert stats.percentile(values, 0.99) == 100.0
    assert stats.percentile(values, 0) == 1.0 and stats.percentile([3.0], 1) == 3.0
    with pytest.raises(ValueError, match="no values"):
        stats.percentile([], 0.5)
    with pytest.raises(ValueError, match="within 0 and 1"):
        stats.percentile([1.0], 99)


def test_the_runner_passes_what_follows_the_double_dash_to_the_benchmark(tmp_path: Path) -> None:
    done = bench("run", "judge_redteam", "--", "--help", tmp_path=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: ") and "judge_redteam" in done.stdout.splitlines()[0]


def _runs(benchmark: Benchmark) -> object:
    """One parameter per benchmark, marked with why it is skipped where it is."""
    marks = [pytest.mark.skip(reason=f"needs {benchmark.needs}")] if benchmark.needs else []
    return pytest.param(benchmark, id=benchmark.name, marks=marks)


@pytest.mark.extended
@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.parametrize("benchmark", [_runs(b) for b in BENCHMARKS])
def test_every_benchmark_still_runs(benchmark: Benchmark, tmp_path: Path) -> None:
    """Its quick run exits 0 and writes its result into the test's folder; a benchmark with
    no quick run answers ``--help`` (its imports and arguments still hold)."""
    if benchmark.slow:
        done = bench("run", benchmark.name, "--", "--help", tmp_path=tmp_path, timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("usage: "), done.stdout[-2000:]
        return
    source = (ROOT / "bench" / f"{benchmark.name}.py").read_text()
    # Its own --record NAME (scaling_16core_code) names the result: used where it has one.
    name = benchmark.name + ("_quick" if "add_record_argument(" in source else "")
    extra = ["--", "--record", name] if name != benchmark.name else []
    done = bench("run", benchmark.name, "--quick", *extra, tmp_path=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    if "results.record(" in source:
        result = json.loads((tmp_path / f"{name}.json").read_text())
        assert result["benchmark"] == name
        assert result["command"].split()[:3] == ["python", "-m", benchmark.module]
        assert result["tables"] and all(table["rows"] for table in result["tables"])
    else:  # it prints its figures and records nothing
        assert done.stdout.strip(), done.stderr[-4000:]


@pytest.mark.extended
@pytest.mark.slow
@pytest.mark.e2e
def test_the_docs_runner_commands_run(tmp_path: Path) -> None:
    """Every ``python -m bench`` line of the docs' sh blocks, as written."""
    commands = [
        line.strip()
        for page in DOCS
        for block in re.findall(r"```sh\n(.*?)```", page.read_text(), re.S)
        for line in block.replace("\\\n", "").splitlines()
        if line.strip().startswith("python -m bench ")
    ]
    assert len(commands) >= 4
    for command in commands:
        argv = command.split()[3:]
        done = bench(*argv, tmp_path=tmp_path, timeout=120)
        assert done.returncode == 0, (command, done.stderr[-3000:])
        assert done.stdout, command


def test_no_benchmark_imports_the_tests() -> None:
    # Tests import bench's data and helpers (bench.code_data, bench.containers, ...); the other
    # way round, a benchmark would run only from a checkout whose tests/ it matches.
    importers = [
        path.name
        for path in sorted((ROOT / "bench").glob("*.py"))
        if re.search(r"^\s*(?:from|import) tests\b", path.read_text(encoding="utf-8"), re.M)
    ]
    assert importers == []
