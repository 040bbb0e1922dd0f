"""From a rollout to the inputs of each component: which source applies, and its item.

Pure functions over plain dicts: no HTTP, no queue. ``tribunal.gateway.verifier`` uses them
to build the downstream items, and the tests use them to check a spec's mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tribunal.gateway.builtins import last_code_block
from tribunal.gateway.specs import Component, InputMapping, Source
from tribunal.wire.errors import BadInput

MAX_ID_CHARS = 512


def resolve_source(component: Component, rollout: Mapping[str, Any]) -> Source | None:
    """The first source whose ``when`` field the rollout carries (non-null), or None."""
    for source in component.one_of:
        if source.when is None or rollout.get(source.when) is not None:
            return source
    return None


def _input_value(name: str, mapping: InputMapping, rollout: Mapping[str, Any]) -> Any:
    if mapping.field is None:
        return mapping.value
    value = rollout.get(mapping.field)
    if value is None:
        return mapping.default
    if mapping.extract == "last_code_block":
        if not isinstance(value, str):
            raise BadInput(f"{mapping.field}: a string is needed for {name}", field=mapping.field)
        return last_code_block(value)
    return value


def build_inputs(source: Source, rollout: Mapping[str, Any]) -> dict[str, Any]:
    """The verifier inputs of ``source`` for ``rollout``; inputs with no value are omitted
    (the verifier's own default applies, or it names the missing field).

    Raises:
        BadInput: An ``extract`` was asked of a value that is not a string.
    """
    inputs: dict[str, Any] = {}
    for name, mapping in source.inputs.items():
        value = _input_value(name, mapping, rollout)
        if value is not None:
            inputs[name] = value
    return inputs


def component_item_id(item_id: str, component: str) -> str:
    """The id a component's downstream item carries: ``<item id>/<component>`` (capped)."""
    suffix = f"/{component}"
    return item_id[: MAX_ID_CHARS - len(suffix)] + suffix
