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
  reasoning), and so is text before a ``</think>`` (a template that opened the block in the
  prompt): the block ends at the last ``</think>`` before the verdict object starts, never
  inside it;
- control tokens that end the text (an end-of-turn token a server left in the content)
  are dropped;
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

from tribunal.llm.untrusted import COMMON_CONTROL_PATTERNS, COMMON_CONTROL_TOKENS
from tribunal.wire.errors import ParseError

MAX_DEPTH = 8
"""Deepest nesting of objects and arrays accepted in an answer (a verdict needs 2)."""

_CLOSE_FENCE = re.compile(r"\A\s*```\s*\Z")
_TRAILING_CONTROL = re.compile(
    "(?:\\s*(?:"
    + "|".join([*COMMON_CONTROL_PATTERNS, *(re.escape(t) for t in COMMON_CONTROL_TOKENS)])
    + "))+\\s*\\Z"
)
_ASCII_LEVEL = re.compile(r"[0-9]{1,3}")
_OBJECT_OPENING = re.compile(r'\{\s*["}]')
"""How every JSON object starts: a ``{`` followed by a key or its end."""
_START_TRIES = 256
"""``{`` positions tried as the verdict object's start (reasoning that quotes more objects
than this before the verdict leaves its close tag to the first-``{`` rule)."""
_PREVIEW_CHARS = 200


def verdict_schema(
    keys: Sequence[str], max_reason_chars: int, levels: Sequence[int]
) -> dict[str, Any]:
    """Return the JSON schema ``{key: {"reason": str, "verdict": one of levels}}``.

    Property order is the generation order under guided decoding (reason before verdict).
    The entries are shared between calls (cached; keys are drawn per call, so the object
    around them is not): do not modify the result.
    """
    entry = _verdict_entry(max_reason_chars, tuple(levels))
    return {
        "type": "object",
        "properties": dict.fromkeys(keys, entry),
        "required": list(keys),
        "additionalProperties": False,
    }


@functools.lru_cache(maxsize=64)
def _verdict_entry(max_reason_chars: int, levels: tuple[int, ...]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "reason": {"type": "string", "maxLength": max_reason_chars},
            "verdict": {"type": "integer", "enum": list(levels)},
        },
        "required": ["reason", "verdict"],
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
    tag into the prompt, with the text itself, and ends at the last ``</think>`` *before
    the verdict object starts* (the leftmost ``{`` whose object ends the text, a closing
    code fence aside), so a tag quoted inside the verdict (a reason that cites the
    response) never cuts it. Where no object ends the text, the block ends at the last
    ``</think>`` before the first ``{``. A ``<think>`` that opens the text and is never
    closed before that point makes it all reasoning (a cut or runaway block is no answer).
    A ``<think>`` in the prose before the answer's first ``{`` opened reasoning that never
    closed: it and what follows go.
    """
    begin, end = _answer_bounds(text)
    return text[begin:end]


def _answer_bounds(text: str) -> tuple[int, int]:
    """Where :func:`strip_reasoning`'s answer lies in ``text`` (begin, end)."""
    opened = text.lstrip().startswith("<think>")
    close = -1
    if "</think>" in text:  # only then is the verdict's start needed (the common case: not)
        start = _verdict_start(text)
        limit = start if start is not None else max(text.find("{"), 0) or len(text)
        close = text.rfind("</think>", 0, limit)
    if close >= 0:
        begin = close + len("</think>")
    elif opened:
        return 0, 0
    else:
        begin = 0
    # A <think> in the prose before the answer's first "{" opened reasoning that never closed.
    brace = text.find("{", begin)
    unclosed = text.find("<think>", begin, brace if brace >= 0 else len(text))
    return begin, len(text) if unclosed < 0 else unclosed


def _object_end(text: str) -> int | None:
    """Where an object that ends ``text`` would end (a closing code fence and whitespace
    aside), or None when ``text`` does not end with ``}``."""
    body = text.rstrip()
    if not body.endswith("}"):
        fence = body.rfind("```")
        if fence < 0 or not _CLOSE_FENCE.match(body[fence:]):
            return None
        body = body[:fence].rstrip()
    return len(body) if body.endswith("}") else None


def _verdict_start(text: str) -> int | None:
    """The leftmost ``{`` whose JSON object ends ``text`` (see :func:`_object_end`), or None.

    Tried at each ``{`` in order, at most :data:`_START_TRIES` of them, and not past one
    nested too deep to decode (the reader refuses such an answer): the work is bounded
    whatever the text. A ``{`` inside a JSON string cannot start an object that ends the
    text (the string's own quotes are escaped there).
    """
    end = _object_end(text)
    if end is None:
        return None
    pos = text.find("{")
    for _ in range(_START_TRIES):
        if not 0 <= pos < end:
            return None
        if _OBJECT_OPENING.match(text, pos) is None:
            pos = text.find("{", pos + 1)
            continue
        try:
            value, stop = _DECODER.raw_decode(text, pos)
        except RecursionError:
            return None
        except ValueError:  # _Duplicate included: the reader reports it
            value, stop = None, -1
        if stop == end and isinstance(value, dict):
            return pos
        pos = text.find("{", pos + 1)
    return None


def drop_trailing_control_tokens(text: str) -> str:
    """Return ``text`` without the control tokens (and whitespace) that end it: an
    end-of-turn or end-of-sequence token a server left in the content after the answer
    (``<|im_end|>``, ``<|eot_id|>``, ``</s>``, ``<end_of_turn>``, ``<｜end▁of▁sentence｜>``).
    Only a run at the very end goes; a token anywhere else stays and is read as text."""
    if not text.rstrip().endswith((">", "]")):
        return text  # the common case: no token ends it, and no scan
    match = _TRAILING_CONTROL.search(text)
    return text if match is None else text[: match.start()]


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
    return read_answer_span(text, finish_reason)[0]


def read_answer_span(
    text: str, finish_reason: str | None = None
) -> tuple[dict[str, Any], int, int]:
    """:func:`read_answer_object`'s object with where it lies in ``text`` (start, end): what
    a reader of token log-probabilities may look at.

    Raises:
        ParseError: As :func:`read_answer_object`.
    """
    if finish_reason == "length":
        raise _unreadable("it hit the token limit", text)
    begin, stop_at = _answer_bounds(drop_trailing_control_tokens(text))
    answer = text[begin:stop_at].rstrip()
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
    start, stop, value = objects[0]
    if stop != end:
        raise _unreadable("text follows its JSON object", text)
    if _depth(value) > MAX_DEPTH:
        raise _unreadable(f"it is nested deeper than {MAX_DEPTH} levels", text)
    return value, begin + start, begin + stop


def _top_level_objects(answer: str, text: str) -> list[tuple[int, int, dict[str, Any]]]:
    """Every decodable top-level ``{…}`` in ``answer`` as (start, end, object), left to right.

    A ``{`` that does not start a decodable object (prose, a cut object) is skipped and the
    scan goes on from the next one, so an object inside a broken one still counts. Each
    failed try costs a scan of the text before it (``json``'s error counts its lines), so
    past :data:`_START_TRIES` of them the answer is unreadable: the work stays linear.
    """
    found: list[tuple[int, int, dict[str, Any]]] = []
    pos = answer.find("{")
    failed = 0
    while pos >= 0:
        if _OBJECT_OPENING.match(answer, pos) is None:  # no object starts here: no decode
            pos = answer.find("{", pos + 1)
            continue
        try:
            value, stop = _DECODER.raw_decode(answer, pos)
        except _Duplicate as exc:
            raise _unreadable(f"key {str(exc)[:50]!r} occurs twice", text) from None
        except RecursionError:
            raise _unreadable("it is nested too deep", text) from None
        except ValueError:  # not JSON, or a number JSON cannot hold (int digit limit)
            failed += 1
            if failed > _START_TRIES:
                why = f"over {_START_TRIES} braces start no JSON object"
                raise _unreadable(why, text) from None
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
