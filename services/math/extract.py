"""Find the final answer of a completion: the last ``\\boxed{}``, GSM8K's ``####``, ...

Extraction is separate from grading (as in Math-Verify, where ``parse`` and ``verify`` are
two functions): :func:`extract_answer` returns the answer text and how it was found, and
``tribunal.math.verify`` compares it. Methods, in priority order:

1. ``boxed`` / ``fbox``: the last ``\\boxed{...}`` or ``\\fbox{...}`` (``\\boxed {..}`` too),
   with nested braces; an unclosed one is skipped.
2. ``gsm8k_hash``: the rest of the line after the last ``####`` (GSM8K solutions).
3. ``answer_phrase``: after the last "The answer is", "Final answer:" or a line starting
   with "Answer:"; the first ``$...$`` / ``\\(...\\)`` in it, or else the text up to the
   end of the sentence.
4. ``last_number``: the last bare number (``-1,234.5``), if the config allows it.

Every pattern is linear in the input: no two adjacent unbounded repeats that can match the
same characters, and braces are matched by one stack pass, so a 1 MB completion made of
``\\boxed{`` or digits is processed in well under a second (``tests/math/test_extract.py``).
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from typing import Literal

ExtractionMethod = Literal["boxed", "fbox", "gsm8k_hash", "answer_phrase", "last_number"]
"""Where the final answer was found."""

ScoreMethod = ExtractionMethod | Literal["none"]
"""A result's ``method``: where the answer was found, or ``none`` (no answer)."""

_BOX_OPEN = re.compile(r"\\(boxed|fbox)[ \t]*\{")
# A backslash escape (``\{``, ``\}``, ``\\``) or a bare brace: the tokens of brace matching.
_BRACE_TOKEN = re.compile(r"\\.|[{}]", re.DOTALL)
_ANSWER_PHRASE = re.compile(
    r"(?:\bfinal\s+answer|\bthe\s+answer|^[ \t>#*]*answer)[ \t*]*(?:\bis\b[ \t*:]*|:[ \t*]*)",
    re.IGNORECASE | re.MULTILINE,
)
_LAST_NUMBER = re.compile(r"(?:(?<![\w.)\]])-)?(?<![\w.])\d+(?:,\d{3})*(?:\.\d+)?(?!\w)")
_MATH_SPANS = (("$$", "$$"), ("\\[", "\\]"), ("\\(", "\\)"), ("$", "$"))
_SENTENCE_END = re.compile(r"\.(?:\s|$)|\s+(?:because|since|as|which|so)\b", re.IGNORECASE)
_MAX_PHRASE_CHARS = 300


@dataclass(frozen=True)
class Extraction:
    """The final answer found in a completion.

    Attributes:
        text: The answer text, stripped of math delimiters (``$``), markdown bold and a
            trailing period; for ``boxed`` the content between the braces.
        method: How it was found (see the module docstring).
    """

    text: str
    method: ExtractionMethod


def extract_answer(response: str, *, allow_last_number: bool = True) -> Extraction | None:
    """Return the final answer of ``response``, or None when it has none.

    Args:
        response: The completion text (any length; linear time).
        allow_last_number: Fall back to the last bare number (method ``last_number``).

    Returns:
        The answer and its method, or None (no answer: the completion's fault).

    Examples:
        >>> extract_answer(r"so $\\boxed{\\frac{1}{2}}$.")
        Extraction(text='\\\\frac{1}{2}', method='boxed')
        >>> extract_answer("She pays 9 * 2 = 18 dollars.\\n#### 18")
        Extraction(text='18', method='gsm8k_hash')
        >>> extract_answer("The answer is **73**.")
        Extraction(text='73', method='answer_phrase')
        >>> extract_answer("no digits here") is None
        True
    """
    for found in (last_boxed(response), _after_hashes(response), _answer_phrase(response)):
        if found is not None:
            return found
    if allow_last_number:
        return _last_number(response)
    return None


def last_boxed(text: str) -> Extraction | None:
    """Return the content of the last closed ``\\boxed{`` / ``\\fbox{`` of ``text``, or None.

    Examples:
        >>> last_boxed(r"\\boxed{1} then \\boxed{\\frac{1}{\\sqrt{2}}}").text
        '\\\\frac{1}{\\\\sqrt{2}}'
    """
    openings = list(_BOX_OPEN.finditer(text))
    if not openings:
        return None
    closing = _match_braces(text, openings[0].end() - 1)
    for opening in reversed(openings):
        brace = opening.end() - 1
        end = closing.get(brace)
        if end is None:
            continue
        content = clean_answer(text[brace + 1 : end])
        if content:
            method: ExtractionMethod = "boxed" if opening.group(1) == "boxed" else "fbox"
            return Extraction(content, method)
    return None


def _match_braces(text: str, start: int) -> dict[int, int]:
    """Map each ``{`` at or after ``start`` to its matching ``}`` (one linear pass)."""
    stack: list[int] = []
    closing: dict[int, int] = {}
    for token in _BRACE_TOKEN.finditer(text, start):
        char = token.group()
        if char == "{":
            stack.append(token.start())
        elif char == "}" and stack:
            closing[stack.pop()] = token.start()
    return closing


def _after_hashes(text: str) -> Extraction | None:
    """Return the rest of the line after the last ``####`` (GSM8K's answer line)."""
    position = text.rfind("####")
    if position < 0:
        return None
    line_end = text.find("\n", position)
    line = text[position : line_end if line_end >= 0 else len(text)]
    content = clean_answer(line.lstrip("#"))
    return Extraction(content, "gsm8k_hash") if content else None


def _answer_phrase(text: str) -> Extraction | None:
    """Return the answer after the last "The answer is" / "Final answer:" / "Answer:"."""
    last = _last_match(_ANSWER_PHRASE, text)
    if last is None:
        return None
    # The phrase runs to the end of its line; matching it separately from the anchor lets
    # a later anchor on the same line win ("the answer is 5. No, the answer is 6").
    line_end = text.find("\n", last.end(), last.end() + _MAX_PHRASE_CHARS)
    phrase = text[last.end() : line_end if line_end >= 0 else last.end() + _MAX_PHRASE_CHARS]
    phrase = phrase.strip().strip("*").strip()
    content = clean_answer(_first_math_span(phrase) or _SENTENCE_END.split(phrase, maxsplit=1)[0])
    return Extraction(content, "answer_phrase") if content else None


def _first_math_span(phrase: str) -> str | None:
    """Return the content of the first ``$..$``, ``$$..$$``, ``\\(..\\)`` or ``\\[..\\]``."""
    best: tuple[int, str] | None = None
    for opener, closer in _MATH_SPANS:
        start = phrase.find(opener)
        while start > 0 and phrase[start - 1] == "\\" and opener == "$":
            start = phrase.find(opener, start + 1)  # ``\$`` is a dollar sign, not math
        if start < 0:
            continue
        end = phrase.find(closer, start + len(opener))
        if end < 0:
            continue
        if best is None or start < best[0]:
            best = (start, phrase[start + len(opener) : end])
    return best[1] if best is not None else None


def _last_number(text: str) -> Extraction | None:
    """Return the last bare number (``-1,234.5``) of ``text``."""
    last = _last_match(_LAST_NUMBER, text)
    return Extraction(last.group(), "last_number") if last is not None else None


def _last_match(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    """Return the last match of ``pattern`` in ``text`` (one linear scan, O(1) memory)."""
    last = deque(pattern.finditer(text), maxlen=1)
    return last[0] if last else None


def clean_answer(answer: str) -> str:
    """Strip whitespace, markdown bold, enclosing math delimiters and a trailing period.

    Examples:
        >>> clean_answer(" **$5$**. ")
        '5'
    """
    answer = answer.strip()
    for _ in range(3):  # ``**$5$**.``: a few layers, in any order
        before = answer
        answer = answer.strip().strip("*").strip()
        if answer.endswith(".") and not answer.endswith("\\."):
            answer = answer[:-1].rstrip()
        for opener, closer in _MATH_SPANS:
            if (
                len(answer) > len(opener) + len(closer)
                and answer.startswith(opener)
                and answer.endswith(closer)
            ):
                answer = answer[len(opener) : -len(closer)].strip()
                break
        if answer == before:
            break
    return answer
