"""The documentation site builds strictly (``make docs``): its generated configuration tables,
its API reference from the docstrings, and a broken link failing the build."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_the_api_reference_comes_from_the_docstrings(site: Path) -> None:
    page = (site / "reference" / "trainer" / "index.html").read_text()
    assert "arXiv 2402.03300" in page  # a docstring of tribunal.trainer.advantages


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "mkdocs.yml", project)
    shutil.copytree(ROOT / "docs", project / "docs")
    for name in ("services", "trainer"):
        (project / name).symlink_to(ROOT / name)
    page = project / "docs" / "index.md"
    page.write_text(page.read_text() + "\nSee [nowhere](no-such-page.md).\n")
    done = build(project, tmp_path / "site")
    assert done.returncode != 0
    assert "no-such-page.md" in done.stderr
