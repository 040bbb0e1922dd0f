"""The two built wheels: the client distribution (client/: ``tribunal-client``) and the
services' (the root: ``tribunal-rl``, which depends on it), everything under ``tribunal``
between them; the client, the wire models and the trainers' integrations import in a fresh venv
that holds only the client wheel, pydantic, httpx, orjson and PyYAML (no server dependency).

Each wheel is built from a copy of its sources (``pip wheel --no-deps
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
    "yaml",
)
"""The client distribution's dependencies with what they import."""

_IMPORTS = """
import json, sys
import tribunal.client
import tribunal.client.score_file
from tribunal.client import SyncTribunalClient, TribunalClient, rewards
from tribunal.wire.citation import CitationItem
from tribunal.wire.code import CodeItem
from tribunal.wire.envelope import ItemResult
from tribunal.wire.judge import JudgeItem
from tribunal.wire.math import MathItem
from tribunal.wire.gateway import GatewayItem
import tribunal.integrations.prime_verifiers
import tribunal.integrations.trl
import tribunal.integrations.verl

client = SyncTribunalClient("http://127.0.0.1:9")
client.close()
MathItem(id="a", response="#### 1", ground_truth="1")
JudgeItem(id="j", question="q", response="r", rubric_sets=["v3@1"])
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules})))
"""


def _build(src: Path, out: Path) -> Path:
    subprocess.run(
        [*PIP, "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(out), str(src)],
        check=True,
        cwd=src,
    )
    [built] = out.glob("*.whl")
    return built


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The client distribution's wheel, built from client/ alone."""
    src = tmp_path_factory.mktemp("client-src")
    shutil.copytree(ROOT / "client", src, dirs_exist_ok=True, ignore=_ignored)
    return _build(src, tmp_path_factory.mktemp("client-dist"))


@pytest.fixture(scope="module")
def services_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The services distribution's wheel, built from the root's pyproject.toml."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for name in ("services", "trainer"):
        shutil.copytree(ROOT / name, src / name, ignore=_ignored)
    return _build(src, tmp_path_factory.mktemp("dist"))


_ignored = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")


def _source_packages(*roots: str) -> set[str]:
    """Dotted names of every package in the sources under ``roots``, as installed."""
    found = set()
    for root in (ROOT / r for r in roots):
        for init in (root / "tribunal").rglob("__init__.py"):
            found.add(".".join(init.parent.relative_to(root).parts))
    return found


def _packages(wheel: Path) -> tuple[set[str], list[str]]:
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"tribunal"}
    packages = {
        n.removesuffix("/__init__.py").replace("/", ".")
        for n in names
        if n.endswith("/__init__.py")
    }
    return packages, names


def _metadata(wheel: Path, name: str) -> str:
    archive = zipfile.ZipFile(wheel)
    [path] = [n for n in archive.namelist() if n.endswith(f".dist-info/{name}")]
    return archive.read(path).decode()


def test_each_wheel_holds_its_folder(wheel: Path, services_wheel: Path) -> None:
    client, client_names = _packages(wheel)
    services, _ = _packages(services_wheel)
    assert client == _source_packages("client")
    assert services == _source_packages("services", "trainer")
    assert not client & services
    assert "tribunal/wire/rubric_sets/v3.yaml" in client_names  # package data
    assert wheel.name.startswith("tribunal_client-")
    assert services_wheel.name.startswith("tribunal_rl-")


def test_the_services_depend_on_the_client_and_register_their_verifiers(
    wheel: Path, services_wheel: Path
) -> None:
    client_meta = _metadata(wheel, "METADATA")
    requires = {
        line.split(": ", 1)[1]
        for line in client_meta.splitlines()
        if line.startswith("Requires-Dist: ")
    }
    assert {r.split(">")[0].split("=")[0] for r in requires} == {
        "httpx",
        "pydantic",
        "orjson",
        "pyyaml",
    }
    assert "Requires-Dist: tribunal-client==0.1.0" in _metadata(services_wheel, "METADATA")
    entry_points = _metadata(services_wheel, "entry_points.txt")
    assert "[tribunal.verifiers]" in entry_points
    assert "math = tribunal.math.api:SERVICE" in entry_points


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
        [str(python), "-c", _IMPORTS], capture_output=True, text=True, cwd=tmp_path
    )
    assert loaded.returncode == 0, loaded.stderr
    modules = set(json.loads(loaded.stdout))
    assert "tribunal" in modules and "pydantic" in modules and "httpx" in modules
    assert not modules & {"fastapi", "redis", "aiohttp", "torch", "sympy", "math_verify"}
    absent = subprocess.run(
        [str(python), "-c", "import tribunal.core"], capture_output=True, text=True, cwd=tmp_path
    )
    assert "No module named 'tribunal.core'" in absent.stderr


def test_the_documented_install_names_the_client_distribution(wheel: Path) -> None:
    # docs/integrations.md's first command is what a trainer's environment installs: the
    # wheel test_client_and_wire_models_import_in_a_fresh_venv installs alone.
    page = (ROOT / "docs" / "integrations.md").read_text()
    command = page.split("```sh\n", 1)[1].split("```", 1)[0].split()
    assert command == ["pip", "install", "tribunal-client"]
    assert _metadata(wheel, "METADATA").splitlines()[1] == f"Name: {command[2]}"
