"""Cache keys of model judgments, from one canonical encoding shared by both judges.

A key is the sha256 of the canonical JSON of ``{"kind": kind, **fields}``: every field is
named and every string quoted and escaped, so no text can spell a field boundary (the old
keys joined fields with NUL bytes, and an uncited sentence written as
``claim NUL id NUL snippet`` was served a cited claim's judgment). ``kind`` names what is
judged (a rubric, a claim's support, a sentence's need for a citation), so two kinds of
judgment never share a key even when their texts agree.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from tribunal.wire.hashing import canonical_json


def judgment_key(kind: str, fields: Mapping[str, Any]) -> str:
    """Return the cache key of one judgment.

    Args:
        kind: What is judged (``rubric``, ``claim_support``, ``claim_need`` ...).
        fields: Everything else that decides the judgment (JSON values; ``kind`` is
            reserved).

    Returns:
        64 lowercase hex digits.

    Raises:
        ValueError: ``fields`` holds the key ``kind``.
    """
    if "kind" in fields:
        raise ValueError("'kind' is the key's own field")
    payload = canonical_json({"kind": kind, **fields})
    # Lone surrogates are refused at the envelope; surrogatepass keeps this total anyway.
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()
