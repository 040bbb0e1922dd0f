"""The floors of the package, ground up: core and the wire models; the LLM backends and the
client; the verifiers; the gateway; the integrations, the CLI, the test stack and the trainer.
An import only points down (or within its own package): a module that imports from a floor
above its own fails here, naming the module and the import. Lazy imports inside functions and
imports for type checking count too: they are arrows all the same.

The graph is read by grimp, an import-graph tool, from the three source roots the repository's
own configuration names (pytest's ``pythonpath``, mypy's ``mypy_path``, pyright's
``extraPaths``): every ``tribunal.*`` import of every module must resolve to a module there.
The client distribution (``client/``) imports nothing of the services or the trainer.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

FLOORS = {
    "core": 0,
    "wire": 0,
    "llm": 1,
    "client": 1,
    "math": 2,
    "code": 2,
    "judge": 2,
    "citation": 2,
    "gateway": 3,
    "integrations": 4,
    "envs": 4,
    "testing": 4,
    "cli": 4,
    "trainer": 4,
}
"""Floor of each package of ``tribunal``."""

CLIENT_PACKAGES = {"client", "wire", "integrations"}
"""What the client distribution (client/pyproject.toml) holds."""


def floor_of(module: str) -> int:
    """The floor of a ``tribunal.*`` module."""
    return FLOORS[module.split(".")[1]]


def roots() -> list[Path]:
    """The folders that hold portions of ``tribunal``, as pytest's configuration lists them."""
    named = PYPROJECT["tool"]["pytest"]["ini_options"]["pythonpath"]
    return [ROOT / name for name in named if (ROOT / name / "tribunal").is_dir()]


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    packages = sorted({f"tribunal.{p.name}" for r in roots() for p in (r / "tribunal").iterdir()})
    packages = [p for p in packages if not p.endswith("__pycache__")]
    return grimp.build_graph(*packages, cache_dir=None)


def upward(importer: str, imported: str) -> bool:
    """Whether ``importer`` importing ``imported`` points to a floor above its own."""
    same_package = importer.split(".")[:2] == imported.split(".")[:2]
    return not same_package and floor_of(imported) > floor_of(importer)


def test_the_roots_are_the_configured_ones() -> None:
    assert [r.name for r in roots()] == ["client", "services", "trainer"]
    assert PYPROJECT["tool"]["mypy"]["mypy_path"] == ["client", "services", "trainer"]
    assert PYPROJECT["tool"]["pyright"]["extraPaths"] == ["client", "services", "trainer"]


def test_every_package_has_a_floor(graph: grimp.ImportGraph) -> None:
    assert {m.split(".")[1] for m in graph.modules} == set(FLOORS)


def test_every_tribunal_import_resolves(graph: grimp.ImportGraph) -> None:
    # A name imported from tribunal.* must be a module the graph holds (or, for
    # `from tribunal.x import name`, the module tribunal.x).
    unresolved = []
    for module in graph.modules:
        path = _path_of(module)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            else:
                continue
            unresolved += [
                f"{module}:{node.lineno} {n}"
                for n in names
                if n.startswith("tribunal.") and n not in graph.modules
            ]
    assert unresolved == []


def test_imports_only_point_down(graph: grimp.ImportGraph) -> None:
    found = [
        f"{importer} imports {imported}"
        for importer in graph.modules
        for imported in graph.find_modules_directly_imported_by(importer)
        if upward(importer, imported)
    ]
    assert found == []


def test_the_client_distribution_imports_only_itself(graph: grimp.ImportGraph) -> None:
    found = [
        f"{importer} imports {imported}"
        for importer in graph.modules
        if importer.split(".")[1] in CLIENT_PACKAGES
        for imported in graph.find_modules_directly_imported_by(importer)
        if imported.split(".")[1] not in CLIENT_PACKAGES
    ]
    assert found == []
    assert {p.name for p in (ROOT / "client" / "tribunal").iterdir()} == CLIENT_PACKAGES


@pytest.mark.parametrize(
    ("importer", "imported", "expected"),
    [
        ("tribunal.core.x", "tribunal.client.client", True),
        ("tribunal.core.x", "tribunal.trainer.cli", True),
        ("tribunal.client.x", "tribunal.wire.code", False),
        ("tribunal.gateway.x", "tribunal.math.verify", False),
        ("tribunal.math.x", "tribunal.gateway.specs", True),
        ("tribunal.wire.x", "tribunal.math.verify", True),
    ],
)
def test_the_check_sees_an_upward_import(importer: str, imported: str, expected: bool) -> None:
    assert upward(importer, imported) is expected


@pytest.mark.parametrize("folder", ["client", "services", "trainer"])
def test_the_lint_refuses_a_source_root_as_a_package(tmp_path: Path, folder: str) -> None:
    # One name per module: an import through a source root (which would load a second copy
    # under a second name) is refused by ruff's banned-api rule in pyproject.toml.
    source = tmp_path / "x.py"
    source.write_text(
        f"import {folder}.tribunal\nfrom {folder}.tribunal import x\nimport tribunal\n"
    )
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "ruff"),
            "check",
            "--config",
            str(ROOT / "pyproject.toml"),
            "--select",
            "TID251",
            "--output-format",
            "concise",
            str(source),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    assert done.stdout.count(f"TID251 `{folder}` is banned") == 2, done.stdout


def _path_of(module: str) -> Path:
    relative = Path(*module.split("."))
    for root in roots():
        for candidate in (root / relative / "__init__.py", root / relative.with_suffix(".py")):
            if candidate.is_file():
                return candidate
    raise FileNotFoundError(module)
