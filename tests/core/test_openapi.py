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


def test_the_gateway_item_is_documented_once_under_its_own_name() -> None:
    document = json.loads((ROOT / "openapi" / "gateway.json").read_text())
    schemas = document["components"]["schemas"]
    assert [name for name in schemas if name.endswith("GatewayItem")] == ["GatewayItem"]
    item = {"$ref": "#/components/schemas/GatewayItem"}
    assert schemas["GatewayScoreRequest"]["properties"]["items"]["items"] == item
    assert schemas["GatewayJobCreate"]["properties"]["items"]["items"] == item


@pytest.mark.parametrize(
    ("name", "result", "details"),
    [
        ("math", "MathItemResult", ["MathDetails"]),
        ("code", "CodeItemResult", ["CodeDetails"]),
        ("code", "CodeRunItemResult", ["RunDetails"]),
        ("judge", "JudgeItemResult", ["JudgeDetails"]),
        ("citation", "CitationItemResult", ["CitationDetails"]),
        (
            "gateway",
            "GatewayItemResult",
            ["SpecDetails", "MathDetails", "CodeDetails", "JudgeDetails", "CitationDetails"],
        ),
    ],
)
def test_results_document_their_details(name: str, result: str, details: list[str]) -> None:
    # What each result's details hold is checked against real results in the verifiers'
    # tests (tests/documents.py); here, that the documents name the models at all.
    schemas = json.loads((ROOT / "openapi" / f"{name}.json").read_text())["components"]["schemas"]
    documented = schemas[result]["properties"]["details"]["anyOf"]
    assert [ref["$ref"].rsplit("/", 1)[1] for ref in documented] == [*details, "NoDetails"]
    score = {"gateway": "/v1/score", "code": "/v1/code/score"}.get(name, f"/v1/{name}/score")
    if result != "CodeRunItemResult":
        answer = _answer_component(name, score, "post")
        assert schemas[answer]["properties"]["results"]["items"]["$ref"].endswith(f"/{result}")
    job_results = schemas[_answer_component(name, "/v1/jobs/{job_id}", "get")]["properties"]
    assert {"$ref": f"#/components/schemas/{result}"} in job_results["results"]["items"]["anyOf"]


def _answer_component(name: str, path: str, method: str) -> str:
    document = json.loads((ROOT / "openapi" / f"{name}.json").read_text())
    answer = document["paths"][path][method]["responses"]["200"]["content"]["application/json"]
    ref: str = answer["schema"]["$ref"]
    return ref.rsplit("/", 1)[1]
