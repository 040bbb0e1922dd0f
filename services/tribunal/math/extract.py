"""Find the final answer of a completion the way models write it.

Extraction is separate from grading (as in Math-Verify, where ``parse`` and ``verify`` are
two functions): :func:`extract_answer` returns the answer text and how it was found, and
``tribunal.math.verify`` compares it. Only the text after the last ``</think>`` is read: a
reasoning block holds drafts, not the answer (a completion whose ``<think>`` is never closed
has no answer). The **marked** answers are, by where they start, the last one winning:

1. ``boxed`` / ``fbox``: the last outermost ``\\boxed{...}`` or ``\\fbox{...}``
   (``\\boxed {..}`` too), with nested braces; an unclosed one is skipped, and a box inside
   a box is part of the outer one's answer (``\\boxed{\\text{not } \\boxed{7}}`` is
   ``\\text{not } 7``). Boxes written one after the other with only separators between them
   (``,``, ``and``, ``\\quad``, ``\\text{ and }``, ``x =``) are one answer, joined as a list
   (at most 64 parts, the last ones): ``\\boxed{1}, \\boxed{2}`` is ``1, 2``. A box after
   prose ("wrong; redo: \\boxed{4}") starts a new answer.
2. ``gsm8k_hash``: the rest of the last line that starts with ``####`` (GSM8K solutions),
   unless that line is a Markdown heading (its text starts with a word: ``#### Step 2``).
3. ``answer_phrase``: after the last "The answer is", "Final answer:" or a line starting
   with "Answer:", and after a subject's "is" in it ("Final Answer: The largest $n$ is
   34."): its first math (with the spans that continue it, ``$12$ and $13$``), else the
   text up to the end of the sentence, or that sentence's one number if it is prose. A
   phrase inside a box is part of the box.

So "\\boxed{5} ... Final answer: 7" is 7, and "#### 5 ... The answer is 7" is 7. With
``last_box=True`` (strict mode) only the last box counts. Without a marked answer:

4. ``last_math``: the last display or inline math (``$...$``, ``$$...$$``, ``\\(...\\)``,
   ``\\[...\\]``; inline math does not cross a line, and a ``$`` span holding prose such
   as "$5 per day, and $" is a currency sign, not math), unless a bare number follows it.
5. ``whole_response``: a completion that is one short line of math and nothing else
   (``\\frac{1}{3}``, ``x \\geq 5``): the whole of it.
6. ``final_equation``: the right-hand side of an ``x = ...`` that ends a completion after
   prose ("Therefore x = \\sqrt{3}."), when it comes after the last math span.
7. ``last_number``: the last bare number (``-1,234.5``, a decimal comma as in ``2,74``),
   if the config allows it.

Each :class:`Extraction` carries the text before and after its answer, so that
``tribunal.math.commit`` can tell a committed answer from a negated, hedged or retracted one.

Every pattern is linear in the input: no two adjacent unbounded repeats that can match the
same characters, and braces are matched by one stack pass, so a 1 MB completion made of
``\\boxed{`` or digits is processed in well under a second (``tests/math/test_extract.py``).
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field, replace

from tribunal.wire.math import ExtractionMethod

_BOX_OPEN = re.compile(r"\\(boxed|fbox)[ \t]*\{")
# A backslash escape (``\{``, ``\}``, ``\\``) or a bare brace: the tokens of brace matching.
_BRACE_TOKEN = re.compile(r"\\.|[{}]", re.DOTALL)
# What may stand between two boxes of one answer: separators, spacing, math delimiters,
# "and" / "or" (bare, in \text{}, or after one word: "papers and"), and a label such as
# "x =" or "y_2 =". The alternatives never match the same text, so a failed match does
# not backtrack exponentially; gaps longer than _MAX_JOINER_CHARS are never tried.
_BOX_JOINER = re.compile(
    r"(?:\s|[,;&.]|\\[,;:! ]|\\q?quad\b|\\\\|\\[()\[\]]|\$|\b(?:and|or)\b"
    r"|\\(?:text|mathrm|textbf)\{[^{}$]{0,40}?\b(?:and|or)\s*\}"
    r"|\b(?!(?:and|or)\b)[A-Za-z]{1,15}[ \t]+(?:and|or)\b"
    r"|[A-Za-z](?:_\{?\w{1,4}\}?)?[ \t]*=)*"
)
_ANSWER_PHRASE = re.compile(
    r"(?:\bfinal\s+answer|\bthe\s+answer|^[ \t>#*]*answer)[ \t*]*(?:\bis\b[ \t*:]*|:[ \t*]*)",
    re.IGNORECASE | re.MULTILINE,
)
# "The largest $n$ is 34": the subject, then "is" (math spans may hold periods).
_SUBJECT_IS = re.compile(r"(?:[^.$\n]|\$[^$\n]*\$)*?\b(?:is|are|equals)\b[ \t:]*", re.IGNORECASE)
# A number: a fraction (``2/3``), thousands groups (``1,000``), a decimal point, or a decimal
# comma when the digits after it cannot be a thousands group (``2,74``, ``1000,99``, ``0,111``).
_NUMBER = r"(?:\d+/\d+(?![\d/]|[.,]\d)|0,\d+|\d+,\d{1,2}(?![\d,])|\d+(?:,\d{3})*(?:\.\d+)?)"
# Not the minutes of a time: "2:00 pm" ends in the number 2.
_LAST_NUMBER = re.compile(r"(?:(?<![\w.)\]])-)?(?<![\w.,:])(?:" + _NUMBER + r"|\.\d+)(?![\d])")
_MATH_SPANS = (("$$", "$$"), ("\\[", "\\]"), ("\\(", "\\)"), ("$", "$"))
_MATH_DELIMITER = re.compile(r"\\\$|\$\$|\$|\\\(|\\\)|\\\[|\\\]")
_CLOSERS = {"$$": "$$", "$": "$", "\\(": "\\)", "\\[": "\\]"}
# Two plain words in a row ("per day"): prose, not math (``\text{...}`` is dropped first).
_PROSE = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}[ \t]+[A-Za-z]{3,}\b")
_WORD = re.compile(r"(?<![\\A-Za-z])(?!(?:and|or)\b)[A-Za-z]{2,}")
_TEXT_COMMAND = re.compile(
    r"\\(?:text|mathrm|textbf|mbox|operatorname|begin|end)\{[^{}]*\}|\\[A-Za-z]+"
)
_ONE_WORD = re.compile(r"[A-Za-z]{1,20}\.?")
_SENTENCE_END = re.compile(r"\.(?:\s|$)|\s+(?:because|since|as|which|so)\b", re.IGNORECASE)
_MAX_PHRASE_CHARS = 300
# "x = <right-hand side>" at the end of the text: one variable (``x``, ``a_n``, ``y_{2}``)
# after a space or punctuation, one "=", nothing but the right-hand side after it.
_FINAL_EQUATION = re.compile(
    r"(?<![^\s,:;(])[A-Za-z](?:_\{?\w{1,8}\}?)?[ \t]*=[ \t]*([^=\n]+?)[ \t]*[.!]?\Z"
)
_RELATION = re.compile(r"[=<>]|\\(?:[lg]eq?|[lg]t|neq?|approx|in)\b")
_MAX_WHOLE_CHARS = 200
_MAX_JOINER_CHARS = 120
# At most this many boxes or spans make one answer (a longer run is cut, keeping the last).
_MAX_PARTS = 64
_BEFORE_CHARS = 200
# A line that starts with ``####`` (or more) and what follows it on the line.
_HASH_LINE = re.compile(r"[ \t]*#{4,}[ \t]*(.*)")
# A Markdown heading's text starts with a word ("#### Step 2"); an answer with a value.
_HEADING = re.compile(r"[*_ \t]*[A-Za-z]{2,}")


@dataclass(frozen=True)
class Extraction:
    """The final answer found in a completion.

    Attributes:
        text: The answer text, stripped of math delimiters (``$``), markdown bold and a
            trailing period; for ``boxed`` the content between the braces.
        method: How it was found (see the module docstring).
        parts: For an answer joined from several boxes or math spans, each one's content
            (``text`` is them joined with ``", "``); empty otherwise. Not compared.
        before: Up to 200 characters of the text just before the answer. Not compared.
        after: All the text after the answer (its sentence's end, later sentences). Not
            compared.
        statement: For an answer phrase, its sentence after the phrase ("not 7", "7, or
            possibly nine"), of which the answer is a part. Not compared.
    """

    text: str
    method: ExtractionMethod
    parts: tuple[str, ...] = field(default=(), compare=False, repr=False)
    before: str = field(default="", compare=False, repr=False)
    after: str = field(default="", compare=False, repr=False)
    statement: str = field(default="", compare=False, repr=False)


def extract_answer(
    response: str, *, allow_last_number: bool = True, last_box: bool = False
) -> Extraction | None:
    """Return the final answer of ``response``, or None when it has none.

    Args:
        response: The completion text (any length; linear time).
        allow_last_number: Fall back to the last bare number (method ``last_number``).
        last_box: Strict mode: the answer is the last box, and a completion without one
            has no answer.

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
    text = final_part(response)
    boxed = _boxed_run(text)
    if last_box:
        return boxed[0] if boxed is not None else None
    phrase = _answer_phrase(text)
    if boxed is not None and phrase is not None and boxed[1] <= phrase[1] < boxed[2]:
        phrase = None  # \boxed{\text{The answer is } 7}: the box is the answer
    box = (boxed[0], boxed[1]) if boxed is not None else None
    marked = [found for found in (box, _after_hashes(text), phrase) if found is not None]
    if marked:  # the one that starts last
        return max(marked, key=lambda found: found[1])[0]
    return _unmarked_answer(text, allow_last_number=allow_last_number)


def final_part(response: str) -> str:
    """The text after the last ``</think>``; ``""`` when a ``<think>`` is never closed.

    A reasoning block holds drafts and rejected answers; the final answer follows it.
    """
    close = response.rfind("</think>")
    if close >= 0:
        return response[close + len("</think>") :]
    return "" if "<think>" in response else response


def _unmarked_answer(response: str, *, allow_last_number: bool) -> Extraction | None:
    """The answer of a completion without a box, ``####`` or answer phrase (methods 4-7)."""
    math = _last_math(response)
    if math is None and _is_whole_answer(response):
        return Extraction(clean_answer(response), "whole_response")
    equation = _final_equation(response)
    if equation is not None and (math is None or equation[1] >= math[1]):
        return equation[0]
    number = _last_match(_LAST_NUMBER, response) if allow_last_number else None
    if math is not None and (number is None or number.start() < math[1]):
        return math[0]
    if number is None:
        return None
    before, after = _around(response, number.start(), number.end())
    return Extraction(number.group(), "last_number", before=before, after=after)


def _around(text: str, start: int, end: int) -> tuple[str, str]:
    """The context of an answer at ``text[start:end]``: 200 characters before, all after."""
    return text[max(0, start - _BEFORE_CHARS) : start], text[end:]


def last_boxed(text: str) -> Extraction | None:
    """Return the last closed ``\\boxed{`` / ``\\fbox{`` answer of ``text``, or None.

    Boxes that follow each other with only separators between them are one answer, joined
    with ``", "`` (duplicates dropped); see the module docstring.

    Examples:
        >>> last_boxed(r"\\boxed{1} then \\boxed{\\frac{1}{\\sqrt{2}}}").text
        '\\\\frac{1}{\\\\sqrt{2}}'
        >>> last_boxed(r"\\boxed{(2, 2)} \\quad \\text{and} \\quad \\boxed{(6, 2)}").text
        '(2, 2), (6, 2)'
    """
    found = _boxed_run(text)
    return found[0] if found is not None else None


def _boxed_run(text: str) -> tuple[Extraction, int, int] | None:
    """Return the last boxed answer of ``text``, where it starts and where it ends.

    Only outermost boxes count (a box inside another is part of its content). Walks back
    from the last closed, non-empty one through the boxes that only separators divide from
    it; each box's content is read once, so the walk is linear.
    """
    outermost = _outermost_boxes(text)
    found = _run_before(text, outermost, len(outermost))
    return found[:3] if found is not None else None


def _outermost_boxes(text: str) -> list[tuple[re.Match[str], int]]:
    """The closed outermost boxes of ``text``: each opening and the index of its ``}``."""
    openings = list(_BOX_OPEN.finditer(text))
    if not openings:
        return []
    closing = _match_braces(text, openings[0].end() - 1)
    outermost: list[tuple[re.Match[str], int]] = []
    outer_end = -1
    for opening in openings:
        end = closing.get(opening.end() - 1)
        if end is not None and opening.start() > outer_end:
            outermost.append((opening, end))
            outer_end = end
    return outermost


def _run_before(
    text: str, outermost: list[tuple[re.Match[str], int]], stop: int
) -> tuple[Extraction, int, int, int] | None:
    """The last run of boxes among ``outermost[:stop]``: the answer, its start and end, and
    the index of the first box before the run (where the previous run ends)."""
    run: list[tuple[int, int, str]] = []  # (start, end, content), last box first
    method: ExtractionMethod = "boxed"
    index = stop
    while index > 0:
        opening, end = outermost[index - 1]
        if len(run) == _MAX_PARTS:
            break
        if run and not _joins(text, end + 1, run[-1][0]):
            break  # prose between this box and the run
        content = clean_answer(_unboxed(text[opening.end() : end]))
        index -= 1
        if not content:
            if run:
                break
            continue
        if not run:
            method = "boxed" if opening.group(1) == "boxed" else "fbox"
        run.append((opening.start(), end + 1, content))
    if not run:
        return None
    start, end = run[-1][0], run[0][1]
    before, after = _around(text, start, end)
    found = _joined_extraction([span[2] for span in reversed(run)], method)
    return replace(found, before=before, after=after), start, end, index


def boxed_runs(text: str, *, limit: int) -> list[tuple[Extraction, int, int]]:
    """Return every boxed answer of ``text`` (runs of adjacent boxes as one), in order.

    Args:
        text: The text to search (one pass to pair its braces).
        limit: At most this many answers, the last ones.

    Returns:
        ``(answer, start, end)`` of each, first to last.
    """
    outermost = _outermost_boxes(text)
    runs: list[tuple[Extraction, int, int]] = []
    stop = len(outermost)
    while len(runs) < limit:
        found = _run_before(text, outermost, stop)
        if found is None:
            break
        runs.append(found[:3])
        stop = found[3]
    return runs[::-1]


def is_heading(line_text: str) -> bool:
    """Whether the text after ``####`` is a Markdown heading's ("Step 2"), not a value."""
    return _HEADING.match(line_text) is not None


def _unboxed(content: str) -> str:
    """``content`` with the ``\\boxed{`` / ``\\fbox{`` wrappers inside it removed (their
    content kept): ``\\text{not } \\boxed{7}`` -> ``\\text{not } 7``."""
    openings = list(_BOX_OPEN.finditer(content))
    if not openings:
        return content
    closing = _match_braces(content, openings[0].end() - 1)
    cut: list[tuple[int, int]] = []  # (start, end) of the text to drop
    for opening in openings:
        end = closing.get(opening.end() - 1)
        if end is not None:
            cut += [(opening.start(), opening.end()), (end, end + 1)]
    pieces, position = [], 0
    for start, end in sorted(cut):
        pieces.append(content[position:start])
        position = end
    pieces.append(content[position:])
    return "".join(pieces)


def _joined(
    text: str, spans: list[tuple[int, int, str]], *, values_only: bool = False
) -> list[str]:
    """Join the last of ``spans`` with those just before it that only separators divide.

    Args:
        text: The text the spans were found in.
        spans: ``(start, end, content)`` in order of position; not empty.
        values_only: Join only spans without ``=`` or a relation (math spans: in
            "$AB = \\frac{5}{4}$, or $1.25$" the second restates the first).

    Returns:
        The contents of the run, in order.
    """
    run = [spans[-1]]  # last first
    for span in reversed(spans[:-1]):
        if len(run) == _MAX_PARTS or span[1] > run[-1][0] or not _joins(text, span[1], run[-1][0]):
            break  # nested in the next one, or prose between them
        if values_only and any(_RELATION.search(part[2]) for part in (span, run[-1])):
            break
        run.append(span)
    return [span[2] for span in reversed(run)]


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


def _after_hashes(text: str) -> tuple[Extraction, int] | None:
    """Return the rest of the last line that starts with ``####`` and is not a Markdown
    heading (GSM8K's answer line), and where that line starts.

    Walks back from the last ``####`` (``str.rfind``: no pass over the text per line).
    """
    position = text.rfind("####")
    while position >= 0:
        line_start = text.rfind("\n", 0, position) + 1
        if text[line_start:position].strip(" \t#") == "":
            line = _HASH_LINE.match(text, line_start)
            assert line is not None  # spaces, hashes, then "####"
            content = clean_answer(line.group(1))
            if content and not _HEADING.match(line.group(1)):
                return Extraction(content, "gsm8k_hash", after=text[line.end() :]), line_start
        position = text.rfind("####", 0, line_start)
    return None


def _answer_phrase(text: str) -> tuple[Extraction, int] | None:
    """Return the answer after the last "The answer is" / "Final answer:" / "Answer:", and
    where that phrase starts."""
    last = _last_match(_ANSWER_PHRASE, text)
    if last is None:
        return None
    # The phrase runs to the end of its line; matching it separately from the anchor lets
    # a later anchor on the same line win ("the answer is 5. No, the answer is 6").
    line_end = text.find("\n", last.end(), last.end() + _MAX_PHRASE_CHARS)
    raw = text[last.end() : line_end if line_end >= 0 else last.end() + _MAX_PHRASE_CHARS]
    sentence_end = _SENTENCE_END.search(raw)
    cut = sentence_end.start() if sentence_end is not None else len(raw)
    statement = raw[:cut]
    subject_is = _SUBJECT_IS.match(statement)
    if subject_is is not None and subject_is.end() < len(statement.rstrip()):
        statement = statement[subject_is.end() :]  # "The maximum number ... is 19": "19"
    after = text[last.end() + cut :]
    phrase = raw.strip().strip("*").strip()
    subject = _SUBJECT_IS.match(phrase)
    if subject is not None and subject.end() < len(phrase):
        phrase = phrase[subject.end() :]  # "The largest $n$ is 34." -> "34."
    spans = _math_spans(phrase)
    if spans:  # the first math of the phrase, with the spans that continue it
        run = [spans[0]]
        for span in spans[1:]:
            if len(run) == _MAX_PARTS or not _joins(phrase, run[-1][1], span[0]):
                break
            run.append(span)
        if len(run) > 1:
            found = _joined_extraction([span[2] for span in run], "answer_phrase")
            return replace(found, statement=statement, after=after), last.start()
        content = run[0][2]
    else:
        content = clean_answer(_SENTENCE_END.split(phrase, maxsplit=1)[0])
    if _PROSE.search(content):
        # "Final Answer: Jane started growing Sphere 3 hours ago.": its one number.
        numbers = _LAST_NUMBER.findall(content)
        content = numbers[0] if len(numbers) == 1 else content
    if not content:
        return None
    return Extraction(content, "answer_phrase", statement=statement, after=after), last.start()


def _last_math(text: str) -> tuple[Extraction, int] | None:
    """Return the last math of ``text`` (method ``last_math``) and where it ends, or None.

    Spans that only separators divide (``$1$ and $2$``) are one answer, joined as boxes are.
    """
    spans = _math_spans(text, last=_MAX_PARTS)
    if not spans:
        return None
    run = _joined(text, spans, values_only=True)
    before, after = _around(text, spans[-len(run)][0], spans[-1][1])
    found = _joined_extraction(run, "last_math")
    return replace(found, before=before, after=after), spans[-1][1]


def _joined_extraction(contents: list[str], method: ExtractionMethod) -> Extraction:
    """One answer made of several contents (duplicates dropped), with its parts."""
    parts = tuple(dict.fromkeys(contents))
    return Extraction(", ".join(parts), method, parts if len(parts) > 1 else ())


def _joins(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` only separates two parts of one answer."""
    return end - start <= _MAX_JOINER_CHARS and _BOX_JOINER.fullmatch(text, start, end) is not None


def _math_spans(text: str, *, last: int | None = None) -> list[tuple[int, int, str]]:
    """Return ``(start, end, content)`` of the math spans of ``text``, in order.

    One left-to-right pass pairs the delimiters (``\\$`` is a dollar sign). Inline spans
    (``$``, ``\\(``) do not cross a line; a span whose content reads as prose is a pair of
    currency signs and is skipped, as is an empty one. ``last``: only the last that many
    spans are read (from the end), so that a long text of spans costs little more than the
    pairing pass.
    """
    paired: list[tuple[int, int, int, int]] = []  # span start, content start, end, span end
    opener: re.Match[str] | None = None
    for token in _MATH_DELIMITER.finditer(text):
        if opener is None:
            opener = token if token.group() in _CLOSERS else None
        elif token.group() == _CLOSERS[opener.group()]:
            paired.append((opener.start(), opener.end(), token.start(), token.end()))
            opener = None
    spans: list[tuple[int, int, str]] = []
    for start, content_start, content_end, end in reversed(paired):
        if last is not None and len(spans) == last:
            break
        content = text[content_start:content_end]
        inline = text[start:content_start] in ("$", "\\(")
        cleaned = clean_answer(content)
        if cleaned and not (inline and "\n" in content) and not _is_prose(cleaned):
            spans.append((start, end, cleaned))
    return spans[::-1]


def _is_prose(text: str) -> bool:
    """Whether ``text`` has two plain words in a row outside ``\\text{}`` ("per day")."""
    return _PROSE.search(_TEXT_COMMAND.sub("", text)) is not None


def _final_equation(text: str) -> tuple[Extraction, int] | None:
    """Return the right-hand side of a ``x = ...`` that ends ``text`` after prose, and where
    the equation starts ("Therefore x = \\sqrt{3}." gives ``\\sqrt{3}``)."""
    text = text.rstrip()
    line_start = max(text.rfind("\n") + 1, len(text) - _MAX_PHRASE_CHARS)
    found = _FINAL_EQUATION.search(text, line_start)
    if found is None:
        return None
    right = clean_answer(found.group(1))
    if not right or _WORD.search(_TEXT_COMMAND.sub("", right)):
        return None  # "x = 5 apples": words, not math
    before = text[max(0, found.start() - _BEFORE_CHARS) : found.start()]
    return Extraction(right, "final_equation", before=before), found.start()


def _is_whole_answer(text: str) -> bool:
    """Whether ``text`` is one short line of math: no words (but "and", "or") outside ``\\text``."""
    text = text.strip()
    if not text or len(text) > _MAX_WHOLE_CHARS or "\n" in text or _BOX_OPEN.search(text):
        return False
    if _ONE_WORD.fullmatch(text):
        return True  # "odd", "Even", "Yes"
    return bool(clean_answer(text)) and _WORD.search(_TEXT_COMMAND.sub("", text)) is None


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
