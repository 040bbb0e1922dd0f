"""Canonical JSON and the hashes built on it (cache keys, config hashes, idempotency)."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """Serialise ``value`` so that equal values give equal strings (sorted keys, no spaces)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_hex(value: Any, length: int = 64) -> str:
    """Return the first ``length`` hex digits of the sha256 of ``canonical_json(value)``."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()[:length]


def config_hash(config: Any) -> str:
    """Return the 16-hex-digit hash that names a verifier configuration in every result."""
    return sha256_hex(config, 16)
