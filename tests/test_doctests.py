"""Every docstring example of the package runs: a ``>>>`` line that no longer says what its
function does fails here, like any other test."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_ROOTS = (ROOT / "services", ROOT / "trainer")


def modules_with_examples() -> list[str]:
    """Dotted names of the modules under the package roots whose source holds ``>>>``."""
    names = []
    for root in PACKAGE_ROOTS:
        for path in sorted(root.rglob("*.py")):
            if ">>> " in path.read_text(encoding="utf-8"):
                parts = path.relative_to(root).with_suffix("").parts
                names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


MODULES = modules_with_examples()


def test_the_package_has_docstring_examples() -> None:
    assert len(MODULES) >= 15


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(
        module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, report=False
    )
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
