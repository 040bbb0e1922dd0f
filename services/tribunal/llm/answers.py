"""The answer shape both model-asking verifiers use: one ``{reason, verdict}`` per key.

The judge asks for one verdict per rubric, the citation scorer one per claim and cited
snippet; both constrain the answer with :func:`verdict_schema` and read it back with
:func:`parse_json_object`, which tolerates what models wrap around JSON.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from typing import Any

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)


def verdict_schema(
    keys: Sequence[str], max_reason_chars: int, levels: Sequence[int]
) -> dict[str, Any]:
    """Return the JSON schema ``{key: {"reason": str, "verdict": one of levels}}``.

    Property order is the generation order under guided decoding (reason before verdict).
    The result is shared between calls (cached): do not modify it.
    """
    return _verdict_schema(tuple(keys), max_reason_chars, tuple(levels))


@functools.lru_cache(maxsize=64)
def _verdict_schema(
    keys: tuple[str, ...], max_reason_chars: int, levels: tuple[int, ...]
) -> dict[str, Any]:
    entry = {
        "type": "object",
        "properties": {
            "reason": {"type": "string", "maxLength": max_reason_chars},
            "verdict": {"type": "integer", "enum": list(levels)},
        },
        "required": ["reason", "verdict"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": dict.fromkeys(keys, entry),
        "required": list(keys),
        "additionalProperties": False,
    }


def parse_json_object(text: str) -> dict[str, Any] | None:
    """Return the JSON object in a model's answer, or None.

    A ``<think>…</think>`` block is dropped and the object is taken from the first ``{`` to
    the last ``}`` (models add prose or code fences around it even when told not to).
    """
    text = _THINK.sub("", text).strip()
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        value = json.loads(text[start : end + 1])
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None
