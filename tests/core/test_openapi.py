"""``openapi/<service>.json`` is what ``tribunal openapi`` generates today (no drift)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT
from tribunal.core.app import create_app
from tribunal.core.registry import available_services, load_service


@pytest.mark.parametrize("name", available_services())
def test_committed_openapi_document_is_current(name: str) -> None:
    spec = load_service(name)
    generated = create_app(spec, spec.settings_cls(queue="memory")).openapi()
    path = ROOT / "openapi" / f"{name}.json"
    assert path.exists(), f"{path} is missing: run `tribunal openapi`"
    committed = json.loads(path.read_text())
    assert committed == json.loads(json.dumps(generated)), (
        f"{path} is stale: run `tribunal openapi` and commit the result"
    )


def test_score_route_documents_its_item_schema_and_errors() -> None:
    document = json.loads((ROOT / "openapi" / "math.json").read_text())
    operation = document["paths"]["/v1/math/score"]["post"]
    assert operation["operationId"] == "math_score"
    assert {"413", "422", "429", "503", "504"} <= set(operation["responses"])
    item = document["components"]["schemas"]["MathItem"]
    assert {"id", "response", "ground_truth"} <= set(item["required"])
