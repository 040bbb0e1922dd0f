"""Check real answers against the committed OpenAPI documents (``openapi/<service>.json``).

Every object of the document is closed for the check (``additionalProperties: false`` where
the document names its properties and says nothing else), so a key that goes out on the wire
without being documented fails it, as does a documented key of the wrong type.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from tests.conftest import ROOT


def _closed(node: Any) -> Any:
    if isinstance(node, list):
        return [_closed(value) for value in node]
    if not isinstance(node, dict):
        return node
    closed = {key: _closed(value) for key, value in node.items()}
    if "properties" in closed and "additionalProperties" not in closed:
        closed["additionalProperties"] = False
    return closed


@functools.cache
def _components(service: str) -> dict[str, Any]:
    document = json.loads((ROOT / "openapi" / f"{service}.json").read_text())
    components: dict[str, Any] = _closed(document["components"])
    return components


def assert_documented(service: str, component: str, instance: Any) -> None:
    """Fail unless ``instance`` (decoded JSON) is a ``component`` of ``service``'s document."""
    schema = {"$ref": f"#/components/schemas/{component}", "components": _components(service)}
    error = best_match(Draft202012Validator(schema).iter_errors(instance))
    assert error is None, f"{service} {component}: {error.message} at {list(error.path)}"
