"""Verdicts from a judge completion: a constrained JSON verdict, refined by log-probabilities.

The judge answers ``{"r1": {"reason": str, "verdict": 0|1|2}, ...}`` (a JSON schema under
guided decoding). The level gives the score ``level / 2``; when the backend returned the
log-probabilities of the verdict token, the score is the expectation
``Σ_l P(l)·l / 2`` over the levels, with P renormalised over the verdict tokens the server
listed (so a judge torn between 1 and 2 scores 0.75, not 0.5 or 1).

A verdict that cannot be read is a :class:`ParseError` for that rubric, never a score of 0.
A refusal of the whole call raises :class:`Refusal`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tribunal.core.errors import ParseError, Refusal
from tribunal.judge.prompts import VERDICT_LEVELS, VERDICT_TOKEN_PUNCTUATION
from tribunal.llm import answers
from tribunal.llm.base import Completion, TokenLogprob

_MAX_LEVEL = max(VERDICT_LEVELS)
_VERDICT_VALUE = re.compile(r'"verdict"\s*:\s*"?(\d)')


@dataclass(frozen=True)
class ParsedVerdict:
    """One rubric's verdict.

    Attributes:
        level: 0, 1 or 2, as the judge answered it.
        score: In [0, 1]: ``level / 2``, or the expected level / 2 from log-probabilities.
        source: ``logprobs`` or ``verdict``.
        probs: P(level) by level (``"0"``, ``"1"``, ``"2"``) when log-probabilities were read.
        reason: The judge's short reason ('' when the backend writes none).
    """

    level: int
    score: float
    source: Literal["logprobs", "verdict"]
    probs: dict[str, float] | None
    reason: str


def read_verdicts(
    completion: Completion, keys: Sequence[str], max_reason_chars: int = 1000
) -> dict[str, ParsedVerdict | ParseError]:
    """Read one verdict per key from a completion.

    Args:
        completion: The backend's answer.
        keys: The call's verdict keys (``r1`` ...).
        max_reason_chars: Reasons longer than this are cut.

    Returns:
        For each key, its verdict or the ``ParseError`` that says why it could not be read.

    Raises:
        Refusal: The model or its provider refused the whole call.
    """
    if completion.refusal or completion.finish_reason == "content_filter":
        raise Refusal(f"the judge refused: {completion.refusal or 'content filter'}"[:500])
    obj = answers.parse_json_object(completion.text)
    if obj is None:
        why = (
            "it hit the token limit"
            if completion.finish_reason == "length"
            else "it is not a JSON object"
        )
        error = ParseError(f"unreadable judge answer ({why}): {completion.text[:200]!r}")
        return dict.fromkeys(keys, error)
    if len(keys) == 1 and keys[0] not in obj and "verdict" in obj:
        obj = {keys[0]: obj}  # JSON mode / prompt-only answers sometimes drop the key
    probs_in_order = _verdict_token_probs(completion, obj)
    out: dict[str, ParsedVerdict | ParseError] = {}
    for key in keys:
        entry = obj.get(key)
        level = _level(entry.get("verdict") if isinstance(entry, dict) else None)
        if level is None:
            out[key] = ParseError(f"no verdict 0, 1 or 2 for {key}: {str(entry)[:200]!r}")
            continue
        assert isinstance(entry, dict)
        reason = str(entry.get("reason", ""))[:max_reason_chars]
        probs = probs_in_order.get(key)
        if probs is None:
            out[key] = ParsedVerdict(level, level / _MAX_LEVEL, "verdict", None, reason)
        else:
            expected = sum(p * int(lvl) for lvl, p in probs.items()) / _MAX_LEVEL
            out[key] = ParsedVerdict(level, min(1.0, max(0.0, expected)), "logprobs", probs, reason)
    return out


def _level(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and value in VERDICT_LEVELS:
        return int(value)
    if isinstance(value, str) and value.strip().isdigit() and int(value) in VERDICT_LEVELS:
        return int(value)
    return None


def _verdict_token_probs(
    completion: Completion, obj: dict[str, Any]
) -> dict[str, dict[str, float]]:
    """Map each key to P(level) read at its verdict token, where that can be done safely.

    The i-th ``"verdict": N`` in the text belongs to the i-th entry of ``obj`` (JSON strings
    escape quotes, so a reason cannot contain a match). Returns {} when the tokens do not
    spell the text or the counts disagree: the hard verdict is used then.
    """
    tokens = completion.tokens
    if not tokens or "".join(t.token for t in tokens) != completion.text:
        return {}
    entry_keys = [k for k, v in obj.items() if isinstance(v, dict) and "verdict" in v]
    matches = list(_VERDICT_VALUE.finditer(completion.text))
    if len(matches) != len(entry_keys):
        return {}
    starts: list[int] = []
    offset = 0
    for t in tokens:
        starts.append(offset)
        offset += len(t.token)
    out: dict[str, dict[str, float]] = {}
    index = 0
    for key, match in zip(entry_keys, matches, strict=True):
        pos = match.start(1)
        while index + 1 < len(starts) and starts[index + 1] <= pos:
            index += 1
        probs = _level_probs(tokens[index])
        if probs is not None:
            out[key] = probs
    return out


def _level_probs(token: TokenLogprob) -> dict[str, float] | None:
    """Renormalised P(level) from a verdict token's alternatives (merging ' 2' and '2')."""
    mass: dict[str, float] = {}
    seen: set[str] = set()
    for text, logprob in ((token.token, token.logprob), *token.top):
        if text in seen or not math.isfinite(logprob):
            continue
        seen.add(text)
        core = text.strip(VERDICT_TOKEN_PUNCTUATION)
        if len(core) == 1 and core.isdigit() and int(core) in VERDICT_LEVELS:
            # A log-probability is <= 0; a backend's larger value (float noise, or a bug)
            # is clamped so that exp() can neither overflow nor sum to inf (inf/inf is NaN).
            mass[core] = mass.get(core, 0.0) + math.exp(min(logprob, 0.0))
    total = sum(mass.values())
    if total <= 0 or token.token.strip(VERDICT_TOKEN_PUNCTUATION) not in mass:
        return None
    return {str(lvl): mass.get(str(lvl), 0.0) / total for lvl in VERDICT_LEVELS}
