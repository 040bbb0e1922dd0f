"""Services found by their entry points (group ``tribunal.verifiers``): a third party's
verifier, registered by a distribution of its own, is served like Tribunal's own; core names
none of them.

The third party's distribution is a ``.dist-info`` folder (METADATA and entry_points.txt, what
``pip install`` writes) beside its package in a folder put on ``sys.path``: importlib.metadata
reads it as it reads any installed distribution. Its entry point is the one
docs/development.md shows.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import httpx
import pytest

from tribunal.core import registry
from tribunal.core.app import create_app
from tribunal.core.settings import CoreSettings

ROOT = Path(__file__).resolve().parents[2]

_MODULE = """
from tribunal.core.service import ServiceSpec
from tribunal.core.settings import CoreSettings

from tests.core.toy import ToyVerifier


class Lean(ToyVerifier):
    name = "lean"


SERVICE = ServiceSpec(
    name="lean", port=0, settings_cls=CoreSettings, create_verifiers=lambda s: [Lean()]
)
NOT_A_SERVICE = "math"
"""


def documented_entry_points() -> dict[str, str]:
    """The ``[project.entry-points."tribunal.verifiers"]`` table docs/development.md shows."""
    doc = (ROOT / "docs/development.md").read_text()
    [block] = [b for b in re.findall(r"```toml\n(.*?)```", doc, re.S) if "tribunal.verifiers" in b]
    table: dict[str, str] = tomllib.loads(block)["project"]["entry-points"]["tribunal.verifiers"]
    return table


@pytest.fixture
def third_party(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    package = tmp_path / "lean_verifier"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "api.py").write_text(_MODULE)
    info = tmp_path / "lean_verifier-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: lean-verifier\nVersion: 0.1\n")
    lines = [f"{name} = {target}" for name, target in documented_entry_points().items()]
    lines.append("broken = lean_verifier.api:NOT_A_SERVICE")
    (info / "entry_points.txt").write_text("[tribunal.verifiers]\n" + "\n".join(lines) + "\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


async def test_a_third_party_verifier_is_found_and_served(third_party: Path) -> None:
    assert {"lean", "math", "gateway"} <= set(registry.available_services())
    spec = registry.load_service("lean")
    assert registry.service_module("lean") == "lean_verifier.api"
    app = create_app(spec, CoreSettings(queue="memory"))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            response = await client.post(
                "/v1/lean/score", json={"items": [{"id": "a", "text": "ab"}]}
            )
    assert response.status_code == 200
    assert response.json()["results"][0]["reward"] == 0.5


def test_an_entry_point_that_is_no_service_is_refused(third_party: Path) -> None:
    with pytest.raises(TypeError, match=r"'broken' of group 'tribunal\.verifiers' names a str"):
        registry.load_service("broken")


def test_an_unknown_name_lists_the_registered_ones() -> None:
    with pytest.raises(KeyError, match="unknown service 'nope'; choose one of citation, code"):
        registry.load_service("nope")
    assert "lean" not in registry.available_services()  # only while its folder is on sys.path


def test_core_names_no_service() -> None:
    source = (ROOT / "services/tribunal/core/registry.py").read_text()
    strings = {
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }
    named = {
        s for s in strings for name in ("math", "code", "judge", "citation") if name in s.split(".")
    }
    assert named == set()
