"""Find the answer a declared answer format names in the final answer region.

A spec (and a direct math request) declares its answer format; the completion is first
normalised (``tribunal.math.normalize``) and cut to its final answer region
(``tribunal.math.regions``), and only then is the answer looked for, in that region only:

- ``boxed``: the last outermost ``\\boxed{}`` / ``\\fbox{}`` (boxes joined only by
  separators are one answer, ``\\boxed{1}, \\boxed{2}``);
- ``hash``: the value of the last line ``#### x`` (GSM8K's form; not a Markdown heading
  such as ``#### Step 2``);
- ``answer_line``: the rest of the last line ``Answer: x`` (DAPO's form; ``**Answer:**``,
  ``Final answer:`` too, and Minerva's "Final Answer: The final answer is x. I hope it is
  correct.");
- ``marked``: any of the three marks above (a box, a ``####`` line, an ``Answer:`` line);
  every marked answer in the region must agree (the shipped specs' format: one spec serves
  MATH-style boxes and GSM8K-style ``####`` lines, and a response that marks two values
  is paid nothing);
- ``lenient``: ``tribunal.math.extract.extract_answer``'s cascade (boxes, ``####``, answer
  phrases, last math, last number). It pays answers a policy can place anywhere and reads
  prose to refuse others: **not for training**, kept for evaluation of free-form text.

In the strict formats, more than one distinct answer of the format in the final region is
no answer (``candidates``): a box after the final box, a second ``Answer:`` line. Two
answers are the same when they are equal after spacing, ``\\left`` / ``\\right``,
``\\dfrac`` / ``\\tfrac`` and a leading ``x =`` are dropped. The answer's sentence (its
line for ``hash`` and ``answer_line``) is returned with it, for the rules of
``tribunal.math.commit.uncommitted_in_sentence``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from tribunal.math.extract import (
    Extraction,
    boxed_runs,
    clean_answer,
    extract_answer,
    is_heading,
    last_boxed,
)
from tribunal.math.regions import Region, final_region
from tribunal.wire.math import AnswerFormat, ChatTemplate, ExtractionMethod, RegionName

STRICT_FORMATS: tuple[AnswerFormat, ...] = ("boxed", "hash", "answer_line", "marked")
"""The formats a training spec may use (``lenient`` is for evaluation only)."""

_HASH_LINE = re.compile(r"^[ \t]*####[ \t]*(?!#)([^\n]*?)[ \t]*$", re.MULTILINE)
_ANSWER_LINE = re.compile(
    r"^[ \t>*_#]*(?:final[ \t]+)?answer[ \t*_]*:[ \t*_]*([^\n]*?)[ \t]*$",
    re.MULTILINE | re.IGNORECASE,
)
# Minerva's answer line: "Final Answer: The final answer is $x$. I hope it is correct."
_MINERVA = re.compile(
    r"(?:the\s+)?final\s+answer\s+is\s*:?\s*(.+?)\.?\s*(?:I\s+hope\s+it\s+is\s+correct\.?)?",
    re.IGNORECASE,
)
_KEY_DROPPED = re.compile(r"\s+|\\left\b|\\right\b|\\[,;:! ]|\\displaystyle\b|\$")
_KEY_LABEL = re.compile(r"^[A-Za-z](?:_\{?\w{1,4}\}?)?=(?!=)")
# A sentence boundary before or after an answer: ". " / "! " / "? ", a blank line.
_SENTENCE_BREAK = re.compile(r"[.!?](?=\s)|\n[ \t]*\n")
_MAX_CANDIDATES = 64


@dataclass(frozen=True)
class Graded:
    """What a declared format found in a completion.

    Attributes:
        extraction: The answer (its ``before`` and ``after``: the rest of its sentence on
            each side), or None when the region holds none.
        region: Where the final answer region starts, or None (a ``<think>`` never
            closed: no region).
        candidates: The distinct answers of the format in the region, when there are
            more than one (then nothing is paid); empty otherwise.
    """

    extraction: Extraction | None
    region: RegionName | None
    candidates: tuple[str, ...] = ()


def grade_region(
    response: str,
    answer_format: AnswerFormat,
    *,
    template: ChatTemplate = "chatml",
    allow_last_number: bool = True,
    last_box: bool = False,
) -> Graded:
    """Return the answer ``answer_format`` names in the final answer region of ``response``.

    Args:
        response: The completion, normalised (``tribunal.math.normalize.normalize_text``).
        answer_format: ``boxed``, ``hash``, ``answer_line`` or ``lenient``.
        template: The policy's chat template (``tribunal.math.regions``).
        allow_last_number: ``lenient`` only: fall back to the last bare number.
        last_box: ``lenient`` only: only the last box counts (``MathConfig.last_box_only``).

    Returns:
        The answer, the region's name, and the conflicting candidates if any.

    Examples:
        >>> grade_region("so \\\\boxed{4}. If it were \\\\boxed{5}, ...", "boxed").extraction.text
        '4'
        >>> grade_region("Maybe \\\\boxed{4}, maybe \\\\boxed{5}.", "boxed").candidates
        ('4', '5')
        >>> grade_region("\\\\boxed{4} or \\\\boxed{5}", "boxed").extraction.text  # two roots
        '4, 5'
    """
    region = final_region(response, template)
    if region is None:
        return Graded(None, None)
    if answer_format == "lenient":
        found = extract_answer(region.text, allow_last_number=allow_last_number, last_box=last_box)
        return Graded(found, region.name)
    found_all = _candidates(region, answer_format)
    if not found_all:
        return Graded(None, region.name)
    keys = dict.fromkeys(answer_key(found.text) for found in found_all)
    last = found_all[-1]
    if len(keys) > 1:
        texts = tuple(dict.fromkeys(found.text for found in found_all))
        return Graded(last, region.name, texts)
    return Graded(last, region.name)


def _candidates(region: Region, answer_format: AnswerFormat) -> list[Extraction]:
    """Every answer of the format in the region, in order of position, each with its
    sentence (its line for the line forms)."""
    text = region.text
    found: list[tuple[int, Extraction]] = []
    if answer_format in ("boxed", "marked"):
        for extraction, start, end in boxed_runs(text, limit=_MAX_CANDIDATES):
            lead, tail = _sentence_around(text, start, end)
            found.append((start, replace(extraction, before=lead, after=tail)))
    lines: list[tuple[re.Pattern[str], ExtractionMethod]] = []
    if answer_format in ("hash", "marked"):
        lines.append((_HASH_LINE, "gsm8k_hash"))
    if answer_format in ("answer_line", "marked"):
        lines.append((_ANSWER_LINE, "answer_line"))
    for pattern, method in lines:
        for line in pattern.finditer(text):
            value = line.group(1)
            if method == "gsm8k_hash" and is_heading(value):
                continue
            minerva = _MINERVA.fullmatch(value) if method == "answer_line" else None
            value = minerva.group(1) if minerva is not None else value
            boxed = last_boxed(value)
            if boxed is not None and answer_format == "marked":
                continue  # "Answer: \\boxed{5}": the box is already a candidate
            content = boxed.text if boxed is not None else clean_answer(value)
            if content:
                found.append((line.start(), Extraction(content, method)))
            if len(found) >= 3 * _MAX_CANDIDATES:
                break
    found.sort(key=lambda pair: pair[0])
    return [extraction for _, extraction in found]


def _sentence_around(text: str, start: int, end: int) -> tuple[str, str]:
    """The text of the sentence around ``text[start:end]``: before it and after it."""
    window_start = max(0, start - 2_000)
    breaks = list(_SENTENCE_BREAK.finditer(text, window_start, start))
    lead_start = breaks[-1].end() if breaks else window_start
    after = _SENTENCE_BREAK.search(text, end, end + 2_000)
    tail_end = after.start() + 1 if after is not None else min(len(text), end + 2_000)
    return text[lead_start:start], text[end:tail_end]


def answer_key(answer: str) -> str:
    """The form two answers are compared in to tell whether they are distinct.

    Examples:
        >>> answer_key("x = \\\\dfrac{1}{2}") == answer_key("\\\\frac{1}{2}")
        True
    """
    key = _KEY_DROPPED.sub("", answer).replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    return _KEY_LABEL.sub("", key).rstrip(".")
