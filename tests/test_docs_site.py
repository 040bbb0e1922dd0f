"""The documentation site builds strictly (``make docs``): its generated configuration tables,
its API reference from the docstrings, and a broken link failing the build."""

from __future__ import annotations

import html
import importlib.machinery
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from bench import results

pytestmark = pytest.mark.slow


ROOT = Path(__file__).resolve().parents[1]


def build(project: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of ``project`` (a folder with mkdocs.yml) into ``site``."""
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=project,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = build(ROOT, out)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_the_configuration_tables_are_generated_from_the_settings(site: Path) -> None:
    page = (site / "configuration" / "index.html").read_text()
    assert "tribunal:settings" not in page
    for variable in (
        "TRIBUNAL_WORKER_HEARTBEAT_S",
        "TRIBUNAL_MATH_TIMEOUT_S",
        "TRIBUNAL_CODE_SLOTS",
    ):
        assert f"<code>{variable}</code>" in page
    # Angle brackets outside code spans survive as text (they were taken for tags).
    assert "/k/&lt;key&gt;/" in page and "POST /v1/&lt;verifier&gt;/score" in page


def test_the_benchmark_tables_are_generated_from_the_results(site: Path) -> None:
    """Every ``tribunal:bench`` marker became its result's tables, with the command."""
    page = (site / "benchmarks" / "index.html").read_text()
    assert "tribunal:bench" not in page
    markers = re.findall(
        r"<!-- tribunal:bench (\w+) -->", (ROOT / "docs" / "benchmarks.md").read_text()
    )
    assert markers
    for name in markers:
        result = json.loads((ROOT / "bench" / "results" / f"{name}.json").read_text())
        assert f"<code>{html.escape(result['command'], quote=False)}</code>" in page
        for table in result["tables"]:
            assert f"<th>{html.escape(table['columns'][0], quote=False)}</th>" in page


def test_a_benchmark_result_renders_each_table_with_its_source(tmp_path: Path) -> None:
    hooks = _hooks()
    result = {
        "command": "python bench/x.py --short",
        "date": "2026-11-26 12:00 UTC",
        "machine": {"cpu": "CPU", "cores": 2, "system": "Linux", "python": "3.12"},
        "note": "a short run",
        "tables": [
            results.table(["a", "b"], [[1, "x | y"]], title="First"),
            results.table(["c"], [[None]]),
        ],
    }
    (tmp_path / "x.json").write_text(json.dumps(result))
    text = hooks.bench_markdown("x", tmp_path)
    assert "**First**\n\n| a | b |\n| --- | --- |\n| 1 | x \\| y |\n\nMeasured by " in text
    assert "| c |\n| --- |\n|  |\n\nMeasured by " in text
    source = "`python bench/x.py --short`, 2026-11-26 12:00 UTC (CPU, 2 cores, Linux, Python 3.12)"
    assert text.count(f"Measured by {source}; a short run.") == 2
    (tmp_path / "bad.json").write_text(
        json.dumps({**result, "tables": [{"columns": ["a"], "rows": [[1, 2]], "title": ""}]})
    )
    with pytest.raises(ValueError, match="does not match"):
        hooks.bench_markdown("bad", tmp_path)
    with pytest.raises(ValueError, match="2 cells for 1 columns"):
        results.table(["a"], [[1, 2]])


def test_the_command_is_written_as_typed(monkeypatch: pytest.MonkeyPatch) -> None:
    script = str(ROOT / "bench" / "x.py")
    assert results.command([script, "--rounds", "2"]) == "python bench/x.py --rounds 2"
    module = types.ModuleType("__main__")
    module.__spec__ = importlib.machinery.ModuleSpec("bench.x", None)
    monkeypatch.setitem(sys.modules, "__main__", module)
    assert results.command([script, "--steps", "4"]) == "python -m bench.x --steps 4"


def test_a_range_of_runs_is_one_cell() -> None:
    assert results.span([3.0, 1200.4, 7.0]) == "3–1,200"
    assert results.span([0.104, 0.1041], ".2f", " %") == "0.10 %"
    assert results.span([89.4, 92.0], ".0f", " %") == "89–92 %"
    with pytest.raises(ValueError, match="no values"):
        results.span([])


def _hooks() -> Any:
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_api_reference_comes_from_the_docstrings(site: Path) -> None:
    page = (site / "reference" / "trainer" / "index.html").read_text()
    assert "arXiv 2402.03300" in page  # a docstring of tribunal.trainer.advantages


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "mkdocs.yml", project)
    shutil.copytree(ROOT / "docs", project / "docs")
    for name in ("client", "services", "trainer", "bench"):
        (project / name).symlink_to(ROOT / name)
    page = project / "docs" / "index.md"
    page.write_text(page.read_text() + "\nSee [nowhere](no-such-page.md).\n")
    done = build(project, tmp_path / "site")
    assert done.returncode != 0
    assert "no-such-page.md" in done.stderr
