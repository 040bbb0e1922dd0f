"""The answer shape both model-asking verifiers use: one ``{reason, verdict}`` per key.

The judge asks for one verdict per rubric, the citation scorer one per claim and cited
snippet; both constrain the answer with :func:`verdict_schema` and read it back with
:func:`read_answer_object` and :func:`read_level`.

Reading is strict because the answer quotes text a policy wrote. Where the schema is not
enforced (JSON mode, prompt only, a hosted API that ignores ``response_format``, a thinking
judge), a reasoning block or a prose answer can quote a verdict-shaped object copied from
the graded response; taking "the first ``{`` to the last ``}``" would pay it. So the
verdict is **one JSON object that ends the answer**:

- a ``<think>…</think>`` block that opens the answer is dropped (unclosed, it is all
  reasoning), and so is text before a ``</think>`` that comes before any ``{`` (a template
  that opened the block in the prompt);
- an answer cut by the token limit is unreadable, whatever it parses to;
- exactly one top-level object, with prose (or an opening code fence) allowed before it and
  only whitespace or a closing code fence after it;
- a duplicate key at any depth, a nesting deeper than :data:`MAX_DEPTH`, numbers JSON cannot
  hold, or a verdict that is not one of the ASCII digits asked for: unreadable.

Every unreadable answer is a :class:`~tribunal.wire.errors.ParseError` (retryable), never a
crash and never a verdict.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from typing import Any

from tribunal.wire.errors import ParseError

MAX_DEPTH = 8
"""Deepest nesting of objects and arrays accepted in an answer (a verdict needs 2)."""

_CLOSE_FENCE = re.compile(r"\A\s*```\s*\Z")
_ASCII_LEVEL = re.compile(r"[0-9]{1,3}")
_PREVIEW_CHARS = 200


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


class _Duplicate(ValueError):
    """A key occurs twice in one object."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Duplicate(key)
        out[key] = value
    return out


_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicates)


def strip_reasoning(text: str) -> str:
    """Return the answer part of a model's text: its reasoning block removed.

    Reasoning comes first: it opens with ``<think>`` or, where the chat template wrote that
    tag into the prompt, with the text itself, and ends at a ``</think>``. A ``<think>``
    that opens the text and is never closed makes it all reasoning (a cut or runaway block
    is no answer). The block ends at the last ``</think>`` followed by a ``{``; where none is
    (the judge quoted the tag inside its verdict's reason), at the last one before the
    first ``{``. A ``<think>`` in the prose before the answer's first ``{`` opened reasoning
    that never closed: it and what follows go. Tags inside the object are left to the
    reader, so quoting one in a reason cannot cut an answer.
    """
    opened = text.lstrip().startswith("<think>")
    end = len("</think>")
    last = text.rfind("</think>")
    if last >= 0 and "{" in text[last + end :]:
        answer = text[last + end :]
    elif last >= 0 and (close := text.rfind("</think>", 0, max(text.find("{"), 0))) >= 0:
        answer = text[close + end :]
    elif opened:
        return ""
    else:
        answer = text
    # A <think> in the prose before the answer's first "{" opened reasoning that never closed.
    brace = answer.find("{")
    unclosed = answer.find("<think>", 0, brace if brace >= 0 else len(answer))
    return answer if unclosed < 0 else answer[:unclosed]


def read_answer_object(text: str, finish_reason: str | None = None) -> dict[str, Any]:
    """Return the one JSON object that ends a model's answer (see the module docstring).

    Args:
        text: The message content.
        finish_reason: The backend's finish reason; ``length`` makes any answer unreadable.

    Returns:
        The object, with no duplicate key at any depth and at most :data:`MAX_DEPTH` deep.

    Raises:
        ParseError: Cut by the token limit, no object, more than one top-level object, text
            after it, a duplicate key, too deep, or not decodable.
    """
    if finish_reason == "length":
        raise _unreadable("it hit the token limit", text)
    answer = strip_reasoning(text).rstrip()
    if not answer:
        raise _unreadable("it holds no answer outside its reasoning", text)
    end = len(answer)
    if not answer.endswith("}"):
        # Only a closing code fence may follow the object.
        fence = answer.rfind("```")
        if fence < 0 or not _CLOSE_FENCE.match(answer[fence:]):
            raise _unreadable("it does not end with a JSON object", text)
        end = len(answer[:fence].rstrip())
    objects = _top_level_objects(answer[:end], text)
    if not objects:
        raise _unreadable("it is not a JSON object", text)
    if len(objects) > 1:
        raise _unreadable(f"it holds {len(objects)} top-level JSON objects, not one", text)
    _, stop, value = objects[0]
    if stop != end:
        raise _unreadable("text follows its JSON object", text)
    if _depth(value) > MAX_DEPTH:
        raise _unreadable(f"it is nested deeper than {MAX_DEPTH} levels", text)
    return value


def _top_level_objects(answer: str, text: str) -> list[tuple[int, int, dict[str, Any]]]:
    """Every decodable top-level ``{…}`` in ``answer`` as (start, end, object), left to right.

    A ``{`` that does not start a decodable object (prose, a cut object) is skipped and the
    scan goes on from the next one, so an object inside a broken one still counts.
    """
    found: list[tuple[int, int, dict[str, Any]]] = []
    pos = answer.find("{")
    while pos >= 0:
        try:
            value, stop = _DECODER.raw_decode(answer, pos)
        except _Duplicate as exc:
            raise _unreadable(f"key {str(exc)[:50]!r} occurs twice", text) from None
        except RecursionError:
            raise _unreadable("it is nested too deep", text) from None
        except ValueError:  # not JSON, or a number JSON cannot hold (int digit limit)
            pos = answer.find("{", pos + 1)
            continue
        if isinstance(value, dict):
            found.append((pos, stop, value))
        pos = answer.find("{", stop)
    return found


def _depth(value: Any, limit: int = MAX_DEPTH + 1) -> int:
    """Nesting depth of objects and arrays, counted no further than ``limit``."""
    if limit <= 0 or not isinstance(value, dict | list):
        return 0
    children = value.values() if isinstance(value, dict) else value
    return 1 + max((_depth(child, limit - 1) for child in children), default=0)


def read_level(value: Any, levels: Sequence[int]) -> int | None:
    """Return the verdict level a JSON value spells, or None.

    An integer (or an integral float) in ``levels``, or a string of ASCII digits that is one
    (models under JSON mode sometimes quote it). Booleans, superscript or other Unicode
    digits, fractions and anything else are None.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and value in levels:
        return int(value)
    if isinstance(value, str):
        core = value.strip()
        if _ASCII_LEVEL.fullmatch(core) and int(core) in levels:
            return int(core)
    return None


def preview(text: str) -> str:
    """The start of a model's answer for an error message."""
    return repr(text[:_PREVIEW_CHARS])


def _unreadable(why: str, text: str) -> ParseError:
    return ParseError(f"unreadable answer ({why}): {preview(text)}")
