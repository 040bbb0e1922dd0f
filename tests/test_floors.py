"""The floors of the package, ground up: core and the wire models; the LLM backends and the
client; the verifiers; the gateway; the integrations, the CLI, the test stack and the trainer.
An import only points down (or within its own package: a verifier's wire models may import
its own pure types): a module that imports from a floor
above its own fails here, naming the file and the import. Lazy imports inside functions count
too: they are arrows all the same."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FLOORS = {
    "core": 0,
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
"""Floor of each package (or top-level module) of ``tribunal``."""


def floor_of(module: str) -> int:
    """The floor of a ``tribunal.*`` module; a verifier's or the gateway's ``schemas`` (the
    wire models, importable with pydantic alone) is on the ground floor."""
    parts = module.split(".")
    if len(parts) > 2 and parts[2] == "schemas":
        return 0
    return FLOORS[parts[1]]


def sources() -> list[tuple[Path, str]]:
    """Every module file with its import name."""
    found = [
        (path, ".".join(path.relative_to(root).with_suffix("").parts))
        for root in (ROOT / "services", ROOT / "trainer")
        for path in (root / "tribunal").rglob("*.py")
    ]
    return [
        (path, name.removesuffix(".__init__").removesuffix(".__main__")) for path, name in found
    ]


def upward_imports(path: Path, module: str) -> list[str]:
    """The ``tribunal.*`` imports of ``path`` that point to a floor above ``module``'s."""
    if module == "tribunal":
        return []
    own = floor_of(module)
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        else:
            continue
        for name in names:
            same_package = name.split(".")[:2] == module.split(".")[:2]
            if name.startswith("tribunal.") and not same_package and floor_of(name) > own:
                shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
                found.append(f"{shown}:{node.lineno} imports {name}")
    return found


def test_every_package_has_a_floor() -> None:
    packages = {name.split(".")[1] for _, name in sources() if name.count(".") >= 1}
    assert packages == set(FLOORS)


def test_imports_only_point_down() -> None:
    found = [line for path, module in sources() for line in upward_imports(path, module)]
    assert found == []


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        ("tribunal.core.x", "from tribunal.client import TribunalClient", 1),
        ("tribunal.core.x", "def f():\n    import tribunal.trainer.cli", 1),
        ("tribunal.client.x", "from tribunal.code.schemas import CodeItem", 0),
        ("tribunal.gateway.x", "from tribunal.math.verify import verify_answer", 0),
        ("tribunal.math.x", "from tribunal.gateway.specs import load", 1),
    ],
)
def test_the_check_sees_an_upward_import(
    tmp_path: Path, module: str, source: str, expected: int
) -> None:
    fake = tmp_path / "x.py"
    fake.write_text(source)
    assert len(upward_imports(fake, module)) == expected


@pytest.mark.parametrize("folder", ["services", "trainer"])
def test_the_source_roots_are_not_packages(folder: str) -> None:
    # From the repository root the same file must not import under a second name.
    done = subprocess.run(
        [sys.executable, "-c", f"import {folder}"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 1
    assert f"ImportError: {folder}/ is not a package: import tribunal" in done.stderr
