"""Whether an extracted answer is committed: one value, stated, not negated, hedged or retracted.

A policy trained against an equality check learns that it need not commit: "The answer is
not 7", "at least 7", "7, or possibly nine", ``\\boxed{7 \\text{ or maybe } 9}`` all hold the
gold 7, and Math-Verify (whose unit stripping cuts at the first ``\\text{``, and whose
comparison reads the one number it finds) pays them. :func:`uncommitted` looks at the
extracted answer and the words around it and names why it is no answer, or returns None.

What counts is read in three places: the answer with the sentence that states it (an answer
phrase's), the two words just before it, and the three words just after it; words that the
ground truth itself holds never count, so a gold ``\\text{no solution}`` is still paid.

- ``negated``: in the answer, not, n't, never, no, none, neither, nor, wrong, incorrect,
  false, except, other than, instead of; just before it, not, n't, never; just after it,
  "is not", "isn't", "is wrong"; an answer that starts with ``\\neq``, ``\\neg``, ``≠``, or
  a ``≠`` just before it.
- ``bounded``: in the answer, at least, at most, more / less / fewer / greater / smaller /
  larger than, up to, between, exceeds, minimum, maximum, bound, or more / or less / or so
  (just before it too, unless it is a box: "the maximum value is \\boxed{5}"); just after
  it, "at least", "at most", "and up"; an answer that starts with a relation other than
  ``=`` (``\\geq 7``, ``> 7``), or such a relation just before it (``x \\geq \\boxed{7}``).
- ``hedged``: in the answer, maybe, perhaps, possibly, probably, likely, might, could,
  guess, unsure, either, think, believe; just before it, maybe, perhaps, possibly,
  probably, could, might, may, guess, think, believe, suppose; just after it, "or ...",
  maybe, perhaps, possibly, probably.
- ``multiple``: "or", or two values joined by "and", in the answer when the ground truth is
  one value; ``\\pm 7``.
- ``words``: inside a box, words that are not the gold's and do not trail the value as its
  unit (at most three of them): ``\\boxed{\\text{not } \\boxed{7}}``, ``\\boxed{\\text{about } 7}``.
- ``retracted``: after the answer, a sentence that starts "Wait", "Actually", "Oops",
  "Hmm", "No,", "Scratch that", "On second thought", "Correction", or anywhere "that is
  wrong / incorrect / not right", "I made a mistake", "disregard", "retract", "ignore
  that", "could also be", "or maybe": the answer is taken back (a later answer would have
  been extracted instead).

Approximation words (approximately, about, roughly, ``\\approx``) are not hedges: the value
is compared as written. Every pattern is a fixed alternation of words with whitespace runs
matched possessively, and a sentence's start is found by looking back from its first word
(never a pattern anchored on each character of a run of newlines): linear in the text.
"""

from __future__ import annotations

import re

from tribunal.wire.math import Reason

_NEGATED = re.compile(
    r"\b(?:not|never|no|none|neither|nor|wrong|incorrect|false|except|instead\s+of"
    r"|other\s+than)\b|n't\b|n’t\b"
)
_BOUNDED = re.compile(
    r"\b(?:at\s+(?:least|most)|(?:more|less|fewer|greater|smaller|larger|bigger|higher|lower)"
    r"\s+than|up\s+to|between|exceeds?|exceeding|minimum|maximum|bound|or\s+(?:more|less|fewer"
    r"|so|greater|higher|lower|above|below|over|under))\b"
)
_HEDGED = re.compile(
    r"\b(?:maybe|perhaps|possibly|probably|likely|unlikely|might|could|guess|unsure|either"
    r"|think|believe|unknown|unclear|depends)\b"
)
_OR = re.compile(r"\bor\b")
# Just after an answer only these count ("\boxed{7} or more", "7, or possibly 9", "$7$ is
# not right"): "10 more than Susan" and "3 with neither" say what the value counts.
_TRAILING_HEDGE = re.compile(
    r"(?:(or)\b|maybe|perhaps|possibly|probably|at (?:least|most)|is not|isn't|is wrong"
    r"|is incorrect|and up|and above|give or take|plus or minus)\b"
)
_TRAILING_REASON: dict[str, Reason] = {
    "at": "bounded",
    "and": "bounded",
    "is": "negated",
    "isn't": "negated",
}
# Just before an answer only these count: "is not \boxed{7}", "probably 7".
_NEGATED_LEAD = re.compile(r"\b(?:not|never)\b|n't\b")
_HEDGED_LEAD = re.compile(
    r"\b(?:maybe|perhaps|possibly|probably|could|might|may|guess|think|believe|suppose)\b"
)
_RELATION_REASON: dict[str, Reason] = {
    "\\ne": "negated",
    "\\ln": "negated",
    "¬": "negated",
    "\\no": "negated",
    "≠": "negated",
    "!=": "negated",
    "\\pm": "multiple",
    "\\mp": "multiple",
    "±": "multiple",
}
# Two values joined by "and": "7 and 9", "$7$ and $9$", "7, and nine".
_AND_VALUES = re.compile(r"[\w})$]\s*+,?\s*+\band\b\s*+[-+$\\\w(]")
# A relation with no left-hand side: "\\neq 7", ">= 7", "≥ 7", "\\pm 7".
_LEADING_RELATION = re.compile(
    r"^\s*(?:\\(?:neq?|neg|lnot|not|[lg]eq?q?|[lg]eqslant|[lg]t|[lg]{2}|pm|mp|nless|ngtr)"
    r"(?![A-Za-z])|[<>≤≥≠±¬]|!=)"
)
# A sentence that takes the answer back: its first word (after a sentence end, "**", "but"
# or "and"; see _retracted), or a phrase anywhere.
_RETRACTION_START = re.compile(
    r"\b(?:(?:wait|actually|oops|hmm+|correction)\b|scratch\s++that\b|on\s++second\s++thought\b"
    r"|no\s*+,)",
    re.IGNORECASE,
)
_RETRACTION = re.compile(
    r"\b(?:that|this|it|which|above|answer|result|value)\s*+(?:is|was|'s|’s|seems|looks)\s++"
    r"(?:wrong|incorrect|not\s++(?:right|correct|the\s++answer))\b"
    r"|\b(?:made|make)\s++(?:a|an)\s++(?:mistake|error)\b"
    r"|\b(?:disregard|retract)\b|\bignore\s++(?:that|this|the\s++above)\b"
    r"|\b(?:could|might|may)\s++(?:also|instead|equally)\s++be\b"
    r"|\bor\s++(?:maybe|perhaps|possibly)\b",
    re.IGNORECASE,
)
# A relation just before the answer: "The answer ≠ 7", "x \\geq \\boxed{7}" (not the ">" of
# a tag: "<answer>\\boxed{7}").
_RELATION_BEFORE = re.compile(
    r"(?:\\(?:neq?|neg|lnot|not|[lg]eq?q?|[lg]eqslant|[lg]t|[lg]{2})(?![A-Za-z])|[≤≥≠¬]"
    r"|<|(?<![\w\"'/-])>)[\s$*{(]*+\Z"
)
# The answer's own sentence going on to deny it: "$\\boxed{7}$ is not right".
_DENIED = re.compile(r"[\s,.$*)}\]]*+(?:is|was|'s)\s++(?:not|wrong|incorrect)\b", re.IGNORECASE)
_SENTENCE_START = re.compile(r"(?:[.!?;:]|\*\*|\b(?:but|and))\Z", re.IGNORECASE)
_LOOK_BACK = 40
# Text-mode commands whose braces hold words (``\\text{ or maybe }``).
_TEXT_MODE = re.compile(r"\\(?:text\w*|mbox|mathrm|textbf|operatorname|mathit)\s*\{([^{}]*)\}")
_LATEX_COMMAND = re.compile(r"\\[A-Za-z]+")
_LETTER = re.compile(r"[A-Za-z]")
_PLAIN_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z][A-Za-z'’]*")
_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z][A-Za-z'’]+")
_MATH_TOKEN = re.compile(
    r"[0-9]|\\(?:frac|sqrt|pi|infty|cdot|times)|(?<![A-Za-z])[A-Za-z](?![A-Za-z'’])"
)
_MAX_UNIT_WORDS = 3
_CLAUSE_END = re.compile(r"[.!?;\n](?:\s|$)|\n")
_CLAUSE_CHARS = 80
_LAST_VALUE = re.compile(r"[0-9}][^0-9}]*\Z")
_WORDS_BEFORE = 2
_WORDS_AFTER = 3


def words_of(text: str) -> set[str]:
    """The lowercased plain words (two letters or more) of ``text``, inside ``\\text{}`` too."""
    flat = _TEXT_MODE.sub(lambda m: " " + m.group(1) + " ", text)
    return {w.lower() for w in _WORD.findall(_LATEX_COMMAND.sub(" ", flat))}


def is_multiple(gold: str) -> bool:
    """Whether the ground truth is several values (a top-level comma that is not a thousands
    separator, or "and" / "or" / ``\\cup``): its answers may then join values."""
    if re.search(r"\b(?:and|or)\b|\\cup|;", gold):
        return True
    depth = 0
    for index, char in enumerate(gold):
        depth += (char in "([{") - (char in ")]}")
        if char == "," and depth == 0:
            digits = gold[index - 1 : index].isdigit() and gold[index + 1 : index + 4].isdigit()
            if not digits:
                return True
    return False


def uncommitted(
    answer: str,
    *,
    before: str,
    after: str,
    statement: str = "",
    gold: str,
    boxed: bool,
) -> Reason | None:
    """Return why ``answer`` is not a committed answer to ``gold``, or None when it is.

    Args:
        answer: The extracted answer (a box's content, an answer phrase's value, ...).
        before: The text just before the answer (its last two words are read).
        after: All text after the answer (its first words for hedges, all of it for a
            retraction).
        statement: The sentence the answer was stated in, read whole (an answer phrase's).
        gold: The ground truth as compared; its own words never count against an answer.
        boxed: The answer is a box's content: words in it must be the gold's or a unit.

    Returns:
        The reason (see the module docstring), or None.
    """
    relation = _LEADING_RELATION.match(answer) or _RELATION_BEFORE.search(before[-_LOOK_BACK:])
    if relation is not None and not _LEADING_RELATION.match(gold):
        return _RELATION_REASON.get(relation.group().strip()[:3], "bounded")
    flat = _TEXT_MODE.sub(lambda m: " " + m.group(1) + " ", answer)
    # What states the answer: read whole. The words just before it: only a negation, a
    # hedge, and (unless it is a box) a bound; "the maximum value is \boxed{5}", "at most
    # \boxed{2}" and "..., or $\sqrt{51}$" are how solutions state a value.
    stated = " ".join((statement, _LATEX_COMMAND.sub(" ", flat)))
    stated = stated.lower().replace("’", "'")
    lead = _clause_before(before).lower().replace("’", "'")
    tail = _clause_after(after).lower().replace("’", "'")
    if _LETTER.search(stated) or lead or tail:  # no word at all: nothing to hedge with
        reason = _worded(answer, stated, lead, tail, gold, boxed=boxed)
        if reason is not None:
            return reason
    if after and _retracted(after):
        return "retracted"
    return None


def _retracted(after: str) -> bool:
    """Whether the text after an answer takes it back (see the module docstring).

    A sentence-start word counts after a sentence end, "**", "but" or "and", found by
    looking back a few characters from the word (a regex anchored on the punctuation would
    rescan a run of whitespace from each of its characters).
    """
    if _DENIED.match(after) or _RETRACTION.search(after):
        return True
    for word in _RETRACTION_START.finditer(after):
        window = after[max(0, word.start() - _LOOK_BACK) : word.start()]
        text = window.rstrip()
        if not text or "\n" in window[len(text) :] or _SENTENCE_START.search(text):
            return True  # the text's start, a line's, a long blank, or after a sentence end
    return False


def _worded(
    answer: str, stated: str, lead: str, tail: str, gold: str, *, boxed: bool
) -> Reason | None:
    """The word checks of :func:`uncommitted` (``stated``, ``lead``, ``tail``: lowercased)."""
    gold_words = words_of(gold)
    multiple = is_multiple(gold)

    def found(pattern: re.Pattern[str], text: str) -> bool:
        return any(
            not {w.lower() for w in _PLAIN_WORD.findall(m.group())} <= gold_words
            for m in pattern.finditer(text)
        )

    if found(_NEGATED, stated) or found(_NEGATED_LEAD, lead):
        return "negated"
    if found(_BOUNDED, stated) or (not boxed and found(_BOUNDED, lead)):
        return "bounded"
    if found(_HEDGED, stated) or found(_HEDGED_LEAD, lead):
        return "hedged"
    if not multiple and (found(_OR, stated) or _AND_VALUES.search(stated)):
        return "multiple"
    trailing = _TRAILING_HEDGE.match(tail)
    if trailing is not None and (trailing.group(1) is None or not multiple):
        return _TRAILING_REASON.get(trailing.group().split()[0], "hedged")
    if boxed and _stray_words(answer, gold_words | ({"and", "or"} if multiple else set())):
        return "words"
    return None


def _clause_before(text: str) -> str:
    """The last two words of ``text`` within its sentence and after its last value ("is
    not")."""
    tail = text[-_CLAUSE_CHARS:]
    ends = list(_CLAUSE_END.finditer(tail))
    tail = tail[ends[-1].end() :] if ends else tail
    value = _LAST_VALUE.search(tail)
    tail = tail[value.end() :] if value is not None else tail  # "it's not 10, it's 1,000"
    return " ".join(_PLAIN_WORD.findall(tail)[-_WORDS_BEFORE:])


def _clause_after(text: str) -> str:
    """The first two words of ``text`` within its sentence ("or more", "is not")."""
    head = text[:_CLAUSE_CHARS]
    end = _CLAUSE_END.search(head)
    head = head[: end.start()] if end else head
    return " ".join(_PLAIN_WORD.findall(head)[:_WORDS_AFTER])


def _stray_words(answer: str, gold_words: set[str]) -> bool:
    """Whether a box holds words that are neither the gold's nor a trailing unit."""
    flat = _LATEX_COMMAND.sub(" ", _TEXT_MODE.sub(lambda m: " " + m.group(1) + " ", answer))
    words = [m for m in _WORD.finditer(flat) if m.group().lower() not in gold_words]
    if not words:
        return False
    last_math = max((m.end() for m in _MATH_TOKEN.finditer(flat)), default=-1)
    if last_math < 0:
        return True  # only words, and not the gold's
    return words[0].start() < last_math or len(words) > _MAX_UNIT_WORDS


# The rules that remain for a declared (strict) format, reading the answer's own sentence:
# a strong hedge anywhere in it, a negation in the clause that states the answer.
_SENTENCE_HEDGE = re.compile(
    r"\b(?:maybe|perhaps|possibly|probably|guess|guessing|unsure|not\s+(?:sure|certain)"
    r"|uncertain)\b"
)
# A clause ends at ",", ";", ":" or a connective that starts a new one ("so", "thus").
_CLAUSE_BREAK = re.compile(
    r"[,;:]|\b(?:so|thus|therefore|hence|then|because|since|which|but|and)\b"
)
_CLAUSE_NEGATION = re.compile(r"\b(?:not|never|no|neither|nor|wrong|incorrect|false)\b|n't\b")


def _after_last_number(clause: str) -> str:
    """The text of ``clause`` after its last digit: a negation before a number is about that
    number ("divisible by 2 but not by 3 is \\boxed{17/50}": "not" is about 3, not the
    answer). Only a digit ends it, never a brace: ``\\textbf{not} \\boxed{7}`` stays negated."""
    last = max(clause.rfind(digit) for digit in "0123456789")
    return clause[last + 1 :]


def uncommitted_in_sentence(
    answer: str, *, lead: str, tail: str, gold: str, boxed: bool
) -> Reason | None:
    """Return why an answer of a declared format is not committed, or None.

    The text read is the answer's own sentence only (``lead``: from its start to the
    answer; ``tail``: from the answer to its end), normalised; later sentences (a
    self-check, "Wait, let me double-check ... Yes.") are never read. The rules:

    - :func:`uncommitted` on the answer and its sentence (words in the box, a relation or
      "not" / "probably" just before it, "or more" / "is not" just after it);
    - ``hedged``: maybe, perhaps, possibly, probably, guess, unsure, not sure / certain,
      uncertain, anywhere in the sentence ("I guess, after all this, it is \\boxed{7}");
    - ``negated``: not, never, no, neither, nor, wrong, incorrect, false, n't in the clause
      that states the answer (from the last ",", ";", ":" or connective such as "so",
      "since" before it, and after the last number in it): "The answer is definitely not
      \\boxed{7}", but not "Since 7 is not even, the answer is \\boxed{7}" nor "the
      probability that it is divisible by 2 but not by 3 is \\boxed{\\frac{17}{50}}".

    Words of the ground truth itself never count.

    Args:
        answer: The extracted answer.
        lead: Its sentence before it.
        tail: Its sentence after it.
        gold: The ground truth as compared.
        boxed: The answer is a container's whole content (a box, a ``####`` or
            ``Answer:`` line): words in it must be the gold's or a unit.

    Returns:
        The reason, or None.
    """
    reason = uncommitted(answer, before=lead, after=tail, gold=gold, boxed=boxed)
    if reason is not None:
        return reason
    gold_words = words_of(gold)
    sentence = (lead + " " + tail).lower()
    if any(m.group().split()[0] not in gold_words for m in _SENTENCE_HEDGE.finditer(sentence)):
        return "hedged"
    breaks = list(_CLAUSE_BREAK.finditer(lead.lower()))
    clause = _after_last_number(lead.lower()[breaks[-1].end() :] if breaks else lead.lower())
    if any(m.group() not in gold_words for m in _CLAUSE_NEGATION.finditer(clause)):
        return "negated"
    return None
