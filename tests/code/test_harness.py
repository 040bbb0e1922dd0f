"""The driver's unit as a library: the tagged-JSON codec, the JSON of the protocol, entry-point
resolution, and the unit that ships into the sandbox."""

from __future__ import annotations

import math
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from tribunal.code import sandbox
from tribunal.code.call_role import resolve_target
from tribunal.code.codec import CodecError, Opaque, RemoteObject, decode_value, encode_value
from tribunal.code.protocol import dumps, loads


class Node:
    def __init__(self, val: int, next: Node | None = None) -> None:
        self.val = val
        self.next = next


def test_codec_round_trips_python_types() -> None:
    value = [None, True, 1, 2.5, "s", b"\x00", (1, 2), {3}, frozenset({4}), {1: "a"}, 1 + 2j]
    wire = loads(dumps(encode_value(value)))
    assert decode_value(wire) == value
    assert [type(v) for v in decode_value(wire)] == [type(v) for v in value]


def test_codec_keeps_nan_inf_and_refuses_junk() -> None:
    decoded = decode_value(encode_value([math.nan, math.inf, -math.inf]))
    assert math.isnan(decoded[0]) and decoded[1:] == [math.inf, -math.inf]
    for junk in ({"v": {"$eval": "1"}, "o": []}, {"v": {"$ref": 0}, "o": []}, {"v": 1}):
        with pytest.raises(CodecError):
            decode_value(junk)


def test_codec_objects_are_data_and_cycles_do_not_recurse() -> None:
    head = Node(1, Node(2))
    long = Node(0)
    tail = long
    for k in range(1, 20_000):
        tail.next = Node(k)
        tail = tail.next
    tail.next = long  # a cycle of 20 000 nodes
    decoded = decode_value(encode_value(long), {"Node": Node}.get)
    assert isinstance(decoded, Node) and decoded.next is not None
    assert decoded.next.next is not None and decoded.next.next.val == 2
    unknown = decode_value(encode_value(head))
    assert isinstance(unknown, RemoteObject) and type(unknown).__name__ == "Node"


def test_codec_sends_plain_data_for_hostile_subclasses() -> None:
    class AlwaysEqual(int):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = int.__hash__

    decoded = decode_value(encode_value([AlwaysEqual(7)]))
    assert type(decoded[0]) is int and decoded[0] == 7


def test_codec_opaque_values_keep_truth_only() -> None:
    match = re.search("a", "cat")
    decoded = decode_value(encode_value([match, iter([])]))
    assert isinstance(decoded[0], Opaque) and bool(decoded[0]) and decoded[0] != decoded[1]
    assert isinstance(decode_value(encode_value(len)), Opaque)  # functions too: no data form


def test_resolve_target() -> None:
    namespace = {"Solution": type("Solution", (), {"f": lambda self, x: x + 1}), "g": abs}
    assert resolve_target(namespace, "Solution().f")(1) == 2
    assert resolve_target(namespace, "g")(-3) == 3
    with pytest.raises(NameError):
        resolve_target(namespace, "missing")


def test_json_helpers_refuse_non_json() -> None:
    for text in ("NaN", "[1] x", "{", ""):
        with pytest.raises(ValueError):
            loads(text)
    with pytest.raises(ValueError):
        dumps(math.nan)


def test_the_shipped_unit_stands_alone_and_imports_only_cheap_modules() -> None:
    """protocol, codec and driver ship as one module: it runs where ``tribunal`` is not
    importable (``-I -S``), its parts find each other's names, and it loads neither
    ``typing`` nor ``re`` (about 15 ms of every sandbox's start)."""
    probe = (
        "import sys\n"
        "ns = {'__name__': 'shipped'}\n"
        "exec(compile(sys.stdin.read(), 'driver', 'exec'), ns)\n"
        "wire = ns['loads'](ns['dumps'](ns['encode_value']([(1, 2), {3}])))\n"
        "print(ns['decode_value'](wire), ns['wire_problem'](wire), ns['escape_text']('\\ud800'))\n"
        "print(sorted(m for m in ('tribunal', 'typing', 're', 'json') if m in sys.modules))\n"
    )
    out = subprocess.run(
        ["/usr/bin/python3", "-I", "-S", "-c", probe],
        input=sandbox.DRIVER_SOURCE,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert out == ["[(1, 2), {3}] None \\ud800", "[]"]


def test_the_shipped_unit_refuses_a_name_two_parts_define(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = []
    for name, text in (("a", "X = 1\n"), ("b", "def X() -> None: ...\n")):
        path = tmp_path / f"{name}.py"
        path.write_text(text)
        parts.append(SimpleNamespace(__file__=str(path)))
    monkeypatch.setattr(sandbox, "_SHIPPED", tuple(parts))
    with pytest.raises(RuntimeError, match=r"X is defined in a\.py and b\.py"):
        sandbox.driver_source()
