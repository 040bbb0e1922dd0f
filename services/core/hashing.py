"""Canonical JSON and the hashes built on it (cache keys, config hashes, idempotency), and
the check that text can be hashed at all (no lone surrogates)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import orjson


def canonical_json(value: Any) -> str:
    """Serialise ``value`` so that equal values give equal strings (sorted keys, no spaces)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_hex(value: Any, length: int = 64) -> str:
    """Return the first ``length`` hex digits of the sha256 of ``canonical_json(value)``."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()[:length]


def config_hash(config: Any) -> str:
    """Return the 16-hex-digit hash that names a verifier configuration in every result."""
    return sha256_hex(config, 16)


def lone_surrogate(value: Any) -> tuple[str | int, ...] | None:
    """Return the path of the first string (or key) of ``value`` holding a lone surrogate.

    JSON's ``"\\ud800"`` escape decodes to a str that is not valid Unicode text: it cannot
    be encoded to UTF-8, so it can be neither hashed for the cache nor written back in a
    response. Such an input is refused, naming its field.
    """
    if isinstance(value, dict | list):
        try:
            orjson.dumps(value)  # one pass in C, which refuses any lone surrogate
        except orjson.JSONEncodeError:
            pass  # a lone surrogate, or something else orjson cannot write: look
        else:
            return None
    return _lone_surrogate(value, ())


def _lone_surrogate(value: Any, path: tuple[str | int, ...]) -> tuple[str | int, ...] | None:
    if isinstance(value, str):
        return None if encodes_utf8(value) else path
    if isinstance(value, dict):
        for key, inner in value.items():
            if isinstance(key, str) and not encodes_utf8(key):
                return (*path, printable(key))
            found = _lone_surrogate(inner, (*path, key))
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found = _lone_surrogate(inner, (*path, index))
            if found is not None:
                return found
    return None


def encodes_utf8(text: str) -> bool:
    """True when ``text`` encodes to UTF-8 (it holds no lone surrogate)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def printable(text: str) -> str:
    """``text`` with anything UTF-8 cannot encode written as a ``\\udXXX`` escape."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


SURROGATE_MESSAGE = "contains a lone surrogate (not valid Unicode text); send valid UTF-8"
