"""Canonical JSON and the hashes built on it (cache keys, config hashes, idempotency), and
the check that text can be hashed at all (no lone surrogates).

``sha256_hex`` names things that outlive a request (cache entries, verifier configurations in
every result): its digest must never change. ``json_digest`` only compares two requests of
one deployment (an idempotency key's batch), so it may be computed faster.
"""

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


def json_digest(value: Any) -> str:
    """Return the sha256 hex of ``value`` as JSON with sorted keys, written by orjson.

    As discriminating as ``sha256_hex`` (equal values give equal digests whatever their
    dict key order; values with different canonical JSON give different digests) at about a
    quarter of its cost, for hashing whole batches. orjson writes NaN and infinities as
    ``null`` and refuses integers past 64 bits and lone surrogates: a value holding any of
    them, or anything but dicts, lists, str, int, float, bool and None, is hashed as
    ``canonical_json`` (lone surrogates kept as ``surrogatepass`` bytes) under another
    prefix, so that the two encodings never share a digest. Not ``sha256_hex``'s digest: do
    not store it where ``sha256_hex`` digests are compared.

    Examples:
        >>> json_digest({"a": 1, "b": [None]}) == json_digest({"b": [None], "a": 1})
        True
        >>> json_digest([float("nan")]) == json_digest([None])
        False
    """
    if _plain_json(value):
        try:
            text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError:  # an integer past 64 bits, a lone surrogate
            pass
        else:
            digest = hashlib.sha256(b"orjson:")
            digest.update(text)
            return digest.hexdigest()
    digest = hashlib.sha256(b"json:")
    digest.update(canonical_json(value).encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


_PLAIN_LEAVES = frozenset({str, int, bool, type(None)})


def _plain_json(value: Any) -> bool:
    """True when ``value`` is dicts, lists, str, int, bool, None and finite floats only (what
    orjson writes exactly: it would write NaN and infinities as ``null``)."""
    todo = [value]
    for item in todo:  # grows as it goes: breadth first, without recursion
        kind = type(item)
        if kind in _PLAIN_LEAVES:
            continue
        if kind is dict:
            todo.extend(item.values())
        elif kind is list:
            todo.extend(item)
        elif kind is not float or item - item != 0:  # inf - inf and nan - nan are nan
            return False
    return True


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
