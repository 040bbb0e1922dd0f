"""The built wheel: everything under ``tribunal``, and the client and wire models import in a
fresh venv that holds only the wheel, pydantic, httpx and orjson (no server dependency).

The wheel is built from a copy of the sources (``pip wheel --no-deps
--no-build-isolation``: offline, with this environment's setuptools, pinned >= 68 in the
``dev`` extra). The fresh venv has no system site-packages; pydantic, httpx and orjson (with
their own dependencies) reach it through a ``.pth`` file listing a folder of links to this
environment's copies, so that nothing is downloaded and nothing else is visible.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


ROOT = Path(__file__).resolve().parents[1]

PIP = [sys.executable, "-m", "pip"]

CLIENT_DEPENDENCIES = (
    "pydantic",
    "pydantic_core",
    "annotated_types",
    "typing_extensions",
    "typing_inspection",
    "httpx",
    "httpcore",
    "h11",
    "anyio",
    "idna",
    "certifi",
    "sniffio",
    "orjson",
)
"""pydantic, httpx and orjson with what they import."""

_IMPORTS = """
import json, sys
import tribunal.client
import tribunal.client.score_file
from tribunal.client import SyncTribunalClient, TribunalClient, rewards
from tribunal.citation.schemas import CitationItem
from tribunal.code.schemas import CodeItem
from tribunal.core.envelope import ItemResult
from tribunal.judge.schemas import JudgeItem
from tribunal.math.schemas import MathItem

client = SyncTribunalClient("http://127.0.0.1:9")
client.close()
MathItem(id="a", response="#### 1", ground_truth="1")
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules})))
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for name in ("services", "trainer"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [*PIP, "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(out), str(src)],
        check=True,
        cwd=src,
    )
    [built] = out.glob("tribunal-*.whl")
    return built


def _source_packages() -> set[str]:
    """Dotted names of every package in the sources, as installed."""
    found = set()
    for root in (ROOT / "services", ROOT / "trainer"):
        for init in (root / "tribunal").rglob("__init__.py"):
            found.add(".".join(init.parent.relative_to(root).parts))
    return found


def test_everything_installs_under_tribunal(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"tribunal"}
    packages = {
        n.removesuffix("/__init__.py").replace("/", ".")
        for n in names
        if n.endswith("/__init__.py")
    }
    missing = _source_packages() - packages
    assert not missing, f"not found by pyproject's packages.find: {sorted(missing)}"
    assert "tribunal/judge/rubric_sets/v3.yaml" in names  # package data


def test_client_and_wire_models_import_in_a_fresh_venv(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False, system_site_packages=False)
    python = env_dir / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    subprocess.run(
        [*PIP, "--python", str(python), "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True,
    )
    installed = {p.name for p in site.iterdir()}
    assert "tribunal" in installed
    assert not installed & {"services", "trainer", "bench", "tests"}, installed

    deps = tmp_path / "deps"
    deps.mkdir()
    for name in CLIENT_DEPENDENCIES:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue
        origin = Path(spec.origin)
        target = origin.parent if origin.name == "__init__.py" else origin
        (deps / target.name).symlink_to(target)
    (site / "_client_deps.pth").write_text(f"{deps}\n")

    loaded = subprocess.run(
        [str(python), "-c", _IMPORTS], check=True, capture_output=True, text=True, cwd=tmp_path
    ).stdout
    modules = set(json.loads(loaded))
    assert "tribunal" in modules and "pydantic" in modules and "httpx" in modules
    assert not modules & {"fastapi", "redis", "aiohttp", "torch", "sympy", "math_verify", "yaml"}
