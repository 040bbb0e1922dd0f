"""Verdicts from a judge completion: a constrained JSON verdict, refined by log-probabilities.

The judge answers ``{"r1": {"reason": str, "verdict": 0|1|2}, ...}`` (a JSON schema under
guided decoding). The level gives the score ``level / 2``; when the backend returned the
log-probabilities of the verdict token, the score is the expectation
``Σ_l P(l)·l / 2`` over the levels, with P renormalised over the verdict tokens the server
listed (so a judge torn between 1 and 2 scores 0.75, not 0.5 or 1).

A verdict that cannot be read is a :class:`ParseError` for that rubric, never a score of 0;
log-probabilities that favour another level than the written one are not paid (the written
level is, and the verdict is flagged).
A refusal of the whole call raises :class:`Refusal`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tribunal.judge.prompts import VERDICT_LEVELS, VERDICT_TOKEN_PUNCTUATION
from tribunal.llm import answers
from tribunal.llm.base import Completion, TokenLogprob
from tribunal.wire.errors import ParseError, Refusal

_MAX_LEVEL = max(VERDICT_LEVELS)
_VERDICT_VALUE = re.compile(r'"verdict"\s*:\s*"?([0-9])')
_PROB_TOLERANCE = 1e-6

LOGPROBS_CONTRADICT = "logprobs_contradict_verdict"
"""Flag of a verdict whose token log-probabilities favour another level than the one written
(the written level is scored; the probabilities are kept in the details)."""


@dataclass(frozen=True)
class ParsedVerdict:
    """One rubric's verdict.

    Attributes:
        level: 0, 1 or 2, as the judge answered it.
        score: In [0, 1]: ``level / 2``, or the expected level / 2 from log-probabilities.
        source: ``logprobs`` or ``verdict``.
        probs: P(level) by level (``"0"``, ``"1"``, ``"2"``) when log-probabilities were read.
        reason: The judge's short reason ('' when the backend writes none).
        flag: :data:`LOGPROBS_CONTRADICT` when the log-probabilities favour another level
            than the one written (then ``source`` is ``verdict``), else None.
    """

    level: int
    score: float
    source: Literal["logprobs", "verdict"]
    probs: dict[str, float] | None
    reason: str
    flag: str | None = None


def read_verdicts(
    completion: Completion, keys: Sequence[str], max_reason_chars: int = 1000
) -> dict[str, ParsedVerdict | ParseError]:
    """Read one verdict per key from a completion.

    The answer must be one JSON object that ends it (``tribunal.llm.answers``): a cut
    answer, a second object, trailing text or a duplicate key make every key a
    ``ParseError``. Log-probabilities refine the score only where they agree with the
    written verdict; where another level is more probable than the one written, the
    written verdict is used and ``flag`` says so.

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
    try:
        obj, start, end = answers.read_answer_span(completion.text, completion.finish_reason)
    except ParseError as exc:
        return dict.fromkeys(keys, ParseError(f"judge answer: {exc.message}"))
    probs_in_order = _verdict_token_probs(completion, obj, (start, end))
    out: dict[str, ParsedVerdict | ParseError] = {}
    for key in keys:
        entry = obj.get(key)
        raw = entry.get("verdict") if isinstance(entry, dict) else None
        level = answers.read_level(raw, VERDICT_LEVELS)
        if level is None:
            shown = answers.preview(json.dumps(raw) if _is_scalar(raw) else type(raw).__name__)
            out[key] = ParseError(f"no verdict 0, 1 or 2 for {key}: {shown}")
            continue
        assert isinstance(entry, dict)
        reason = entry.get("reason", "")
        reason = (reason if isinstance(reason, str) else "")[:max_reason_chars]
        out[key] = _verdict(level, reason, probs_in_order.get(key))
    return out


def _verdict(level: int, reason: str, probs: dict[str, float] | None) -> ParsedVerdict:
    """The verdict of one key: the expected level where the log-probabilities agree."""
    if probs is None:
        return ParsedVerdict(level, level / _MAX_LEVEL, "verdict", None, reason)
    if probs[str(level)] + _PROB_TOLERANCE < max(probs.values()):
        # The server says another level was more probable than the one it wrote: at
        # temperature 0 that is a constrained decoder forcing the token, or a server bug.
        # Either way the distribution does not describe this verdict: pay what was written.
        return ParsedVerdict(
            level, level / _MAX_LEVEL, "verdict", probs, reason, LOGPROBS_CONTRADICT
        )
    expected = sum(p * int(lvl) for lvl, p in probs.items()) / _MAX_LEVEL
    return ParsedVerdict(level, min(1.0, max(0.0, expected)), "logprobs", probs, reason)


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _verdict_token_probs(
    completion: Completion, obj: dict[str, Any], span: tuple[int, int]
) -> dict[str, dict[str, float]]:
    """Map each key to P(level) read at its verdict token, where that can be done safely.

    Only the verdict object's own span is searched (reasoning or prose before it may quote
    a ``"verdict": N`` of its own): the i-th ``"verdict": N`` there belongs to the i-th entry
    of ``obj`` (JSON strings escape quotes, so a reason cannot contain a match). Returns {}
    when the tokens do not spell the text or the counts disagree: the hard verdict is used.
    """
    tokens = completion.tokens
    if not tokens or "".join(t.token for t in tokens) != completion.text:
        return {}
    entry_keys = [k for k, v in obj.items() if isinstance(v, dict) and "verdict" in v]
    matches = list(_VERDICT_VALUE.finditer(completion.text, *span))
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
