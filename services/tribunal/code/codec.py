"""The value codec: Python values as tagged JSON, across every boundary of the code runner.

Values cross as data, never pickle: an object whose ``__eq__`` always says True arrives as
plain data. The driver encodes return values in the worker (:func:`encode_value`) and checks
what the worker sent before passing it on (:func:`wire_problem`); the test sandbox decodes
relayed values (:func:`decode_value`); the service compares the bytes of their JSON, and walks
wire values without decoding them where the bytes cannot decide (``compare.reply_matches``),
and encodes the arguments of calls.

This module ships into the sandbox with ``protocol.py`` and the driver's modules (see
``sandbox.driver_source``): only cheap C modules at import time.
"""

from __future__ import annotations

import binascii
import math
import sys

from tribunal.code.protocol import describe, escape_text

MYPY = False
if MYPY:  # annotations only (``from __future__ import annotations``): never imported at run time
    from collections.abc import Callable
    from typing import Any

    from tribunal.code.protocol import Wire


def b64encode(data: bytes) -> str:
    """Base64 of ``data`` without a newline (``binascii``: ``base64`` imports ``re``)."""
    return binascii.b2a_base64(data, newline=False).decode("ascii")


# --------------------------------------------------------------------------------------------
# Value codec (tagged JSON)
# --------------------------------------------------------------------------------------------
#
# Wire form of one value: {"v": <enc>, "o": [<object>, ...]} where <enc> is JSON with these
# tags (a dict with exactly one "$" key): {"$tuple": [...]}, {"$set": [...]},
# {"$frozenset": [...]}, {"$dict": [[k, v], ...]}, {"$bytes": "<base64>"},
# {"$float": "nan" | "inf" | "-inf"}, {"$complex": [re, im]}, {"$range": [start, stop, step]},
# {"$opaque": [type name, truth, repr]} (no data form), {"$ref": n}. Objects of plain
# classes (LeetCode's TreeNode / ListNode) are listed flat in "o" as {"c": class name,
# "a": [[attr, <enc>], ...]} and referenced by index, so long linked lists and cycles never
# recurse.

_UNSERIALISABLE = (
    type,
    type(len),
    type(lambda: None),
    type(sys),
)


class CodecError(ValueError):
    """A value cannot be serialised, or a wire value is malformed."""


class _Encoder:
    def __init__(self) -> None:
        self.objects: list[dict[str, Any]] = []
        self._ids: dict[int, int] = {}
        self._pending: list[tuple[int, Any]] = []
        self._keep: list[Any] = []

    def run(self, value: Any) -> Wire:
        top = self.enc(value)
        while self._pending:
            index, obj = self._pending.pop()
            attrs = vars(obj)
            if type(attrs) is not dict:
                raise CodecError(f"cannot serialise {type(obj).__name__}")
            items = []
            for key, item in list(attrs.items()):
                if type(key) is not str:
                    raise CodecError("attribute names must be strings")
                items.append([key, self.enc(item)])
            self.objects[index]["a"] = items
        return {"v": top, "o": self.objects}

    def enc(self, v: Any) -> Any:  # noqa: C901 - one flat type dispatch reads best
        if v is None or v is True or v is False:
            return v
        if isinstance(v, bool):
            return bool.__bool__(v)
        if isinstance(v, int):
            return int.__int__(v)
        if isinstance(v, float):
            f = float.__float__(v)
            if math.isfinite(f):
                return f
            return {"$float": "nan" if math.isnan(f) else ("inf" if f > 0 else "-inf")}
        if isinstance(v, str):
            return str.__str__(v)
        if isinstance(v, list):
            return [self.enc(x) for x in list.__iter__(v)]
        if isinstance(v, tuple):
            return {"$tuple": [self.enc(x) for x in tuple.__iter__(v)]}
        if isinstance(v, dict):
            return {"$dict": [[self.enc(k), self.enc(x)] for k, x in dict.items(v)]}
        if isinstance(v, frozenset):
            return {"$frozenset": [self.enc(x) for x in frozenset.__iter__(v)]}
        if isinstance(v, set):
            return {"$set": [self.enc(x) for x in set.__iter__(v)]}
        if isinstance(v, (bytes, bytearray)):
            return {"$bytes": b64encode(bytes(v))}
        if isinstance(v, complex):
            return {"$complex": [self.enc(v.real), self.enc(v.imag)]}
        if type(v) is range:
            return {"$range": [v.start, v.stop, v.step]}
        return self._object(v)

    def _object(self, v: Any) -> Any:
        if isinstance(v, _UNSERIALISABLE) or not isinstance(getattr(v, "__dict__", None), dict):
            # No data form (a regex match, an iterator ...): keep its truth value and repr, so
            # that `assert f(x)` works; it equals nothing, so it can never fake a value.
            try:
                truth = bool(v)
                text = repr(v)
            except Exception as exc:
                raise CodecError(f"cannot serialise a value of type {type(v).__name__}") from exc
            return {"$opaque": [escape_text(type(v).__name__, 200), truth, escape_text(text)]}
        key = id(v)
        if key in self._ids:
            return {"$ref": self._ids[key]}
        index = len(self.objects)
        self._ids[key] = index
        self._keep.append(v)  # keep ids unique while encoding
        self.objects.append({"c": type(v).__name__, "a": []})
        self._pending.append((index, v))
        return {"$ref": index}


def encode_value(value: Any) -> Wire:
    """Serialise a Python value to the tagged-JSON wire form.

    Args:
        value: None, bool, int, float, str, bytes, complex, list, tuple, dict, set, frozenset,
            or an instance of a plain class (attributes in ``__dict__``), nested.

    Returns:
        ``{"v": encoded, "o": objects}``, JSON-serialisable with ``allow_nan=False``.

    Raises:
        CodecError: For functions, classes, modules and other values without a data form.
    """
    return _Encoder().run(value)


class RemoteObject:
    """An object decoded from the wire whose class is not known on this side."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {vars(self)!r}>"


class Opaque:
    """A value without a data form (regex match, iterator ...): truth value and repr only.

    Equal only to itself, so it can never stand in for an expected value.
    """

    def __init__(self, type_name: str, truth: bool, text: str) -> None:
        self.type_name = type_name
        self.truth = truth
        self.text = text

    def __bool__(self) -> bool:
        return self.truth

    def __repr__(self) -> str:
        return self.text


_FLOATS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


class _Decoder:
    def __init__(self, objects: list[Any], resolve: Callable[[str], Any]) -> None:
        if type(objects) is not list:
            raise CodecError("objects must be a list")
        self.instances: list[Any] = []
        for spec in objects:
            if type(spec) is not dict or type(spec.get("c")) is not str:
                raise CodecError("malformed object")
            cls: Any = resolve(spec["c"])
            if not isinstance(cls, type):
                cls = type(spec["c"], (RemoteObject,), {})
            try:
                self.instances.append(cls.__new__(cls))
            except Exception as exc:
                raise CodecError(f"cannot create {spec['c']}: {exc}") from None
        for spec, instance in zip(objects, self.instances, strict=True):
            attrs = spec.get("a")
            if type(attrs) is not list:
                raise CodecError("malformed object attributes")
            for pair in attrs:
                if type(pair) is not list or len(pair) != 2 or type(pair[0]) is not str:
                    raise CodecError("malformed object attribute")
                instance.__dict__[pair[0]] = self.dec(pair[1])

    def dec(self, e: Any) -> Any:  # noqa: C901 - one flat tag dispatch reads best
        if e is None or type(e) in (bool, int, float, str):
            return e
        if type(e) is list:
            return [self.dec(x) for x in e]
        if type(e) is not dict or len(e) != 1:
            raise CodecError("malformed value")
        ((tag, body),) = e.items()
        if tag == "$tuple" and type(body) is list:
            return tuple(self.dec(x) for x in body)
        if tag == "$set" and type(body) is list:
            return {self.dec(x) for x in body}
        if tag == "$frozenset" and type(body) is list:
            return frozenset(self.dec(x) for x in body)
        if tag == "$dict" and type(body) is list:
            out = {}
            for pair in body:
                if type(pair) is not list or len(pair) != 2:
                    raise CodecError("malformed dict item")
                out[self.dec(pair[0])] = self.dec(pair[1])
            return out
        if tag == "$bytes" and type(body) is str:
            return binascii.a2b_base64(body.encode("ascii"), strict_mode=True)
        if tag == "$float" and body in _FLOATS:
            return _FLOATS[body]
        if tag == "$complex" and type(body) is list and len(body) == 2:
            return complex(self.dec(body[0]), self.dec(body[1]))
        if tag == "$range" and type(body) is list and [type(x) for x in body] == [int] * 3:
            return range(*body)
        if tag == "$opaque" and type(body) is list and len(body) == 3:
            name, truth, text = body
            if type(name) is str and type(truth) is bool and type(text) is str:
                return Opaque(name, truth, text)
        if tag == "$ref" and type(body) is int and 0 <= body < len(self.instances):
            return self.instances[body]
        raise CodecError(f"unknown tag {tag!r}")


def decode_value(wire: Any, resolve: Callable[[str], Any] | None = None) -> Any:
    """Rebuild a Python value from its wire form.

    Args:
        wire: ``{"v": ..., "o": [...]}`` as produced by :func:`encode_value`.
        resolve: Maps a class name to the class to instantiate (without calling
            ``__init__``); unknown names become :class:`RemoteObject` subclasses.

    Raises:
        CodecError: On any malformed part (unknown tag, bad reference, unhashable key ...).
    """
    if type(wire) is not dict or set(wire) != {"v", "o"}:
        raise CodecError("malformed wire value")
    try:
        decoder = _Decoder(wire["o"], resolve or (lambda name: None))
        return decoder.dec(wire["v"])
    except CodecError:
        raise
    except (TypeError, ValueError, RecursionError, OverflowError, MemoryError) as exc:
        raise CodecError(f"malformed value: {describe(exc, with_type=False)}") from None


# --------------------------------------------------------------------------------------------
# Checks of a wire value from the program
# --------------------------------------------------------------------------------------------


_MAX_WIRE_DEPTH = 100
"""Deepest JSON nesting of a return value the driver passes on (every reader of it, the
service and the test sandbox, parses far deeper without running out of stack)."""
_LIST_TAGS = frozenset(("$tuple", "$set", "$frozenset", "$dict", "$complex", "$range", "$opaque"))


def wire_problem(wire: Any) -> str | None:  # noqa: C901 - one flat tag dispatch reads best
    """Why a wire value (as parsed from the program's process) may not be passed on, or None.

    Checks the shape of :func:`encode_value`'s output, iteratively: known tags, finite
    numbers, nesting at most ``_MAX_WIRE_DEPTH``. The inner forms of tags are left to the
    decoders, which fail closed.
    """
    if (
        type(wire) is not dict
        or len(wire) != 2
        or "v" not in wire
        or type(wire.get("o")) is not list
    ):
        return "malformed value"
    stack: list[tuple[Any, int]] = [(wire["v"], 1)]
    for spec in wire["o"]:
        if type(spec) is not dict or len(spec) != 2 or type(spec.get("c")) is not str:
            return "malformed object"
        if type(spec.get("a")) is not list:
            return "malformed object"
        for pair in spec["a"]:
            if type(pair) is not list or len(pair) != 2 or type(pair[0]) is not str:
                return "malformed object attribute"
            stack.append((pair[1], 3))
    while stack:
        e, depth = stack.pop()
        if depth > _MAX_WIRE_DEPTH:
            return "value nested too deeply"
        kind = type(e)
        if e is None or kind is bool or kind is int or kind is str:
            continue
        if kind is float:
            if not math.isfinite(e):
                return "non-finite number"
            continue
        if kind is list:
            stack.extend((x, depth + 1) for x in e)
            continue
        if kind is dict and len(e) == 1:
            ((tag, body),) = e.items()
            if type(body) is str and (tag == "$bytes" or (tag == "$float" and body in _FLOATS)):
                continue
            if tag == "$ref" and type(body) is int:
                continue
            if tag in _LIST_TAGS and type(body) is list:
                stack.append((body, depth + 1))
                continue
        return "malformed value"
    return None
