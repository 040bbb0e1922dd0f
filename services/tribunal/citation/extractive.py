"""Positive evidence for the lexical mode: a claim matched, near-extractively, in ONE passage.

The lexical mode is default-deny: a cited claim is ``supported`` only when
:func:`extractive_support` finds, in one cited snippet, for every clause of the claim one
sentence of that snippet (segmented by ``tribunal.citation.segment``) such that:

1. **words**: every content stem of the clause is a stem of the sentence (coverage ``full``,
   1.0 by default: a synonym, an added word, a swapped name, a prefix negation such as
   "ineffective" for "effective" is a stem the sentence lacks);
2. **numbers**: every number of the clause is a number of the sentence with the same value,
   exactly, in the same unit or one of the documented conversions
   (``tribunal.citation.content.CONVERSIONS``); a bare number never matches a figure with a
   unit, nor the reverse, and a figure rounded to fewer decimals is not exact;
3. **role**: where the sentence gives figures in several parts ("A rose 12% and B 30%"), the
   part that holds the clause's figure shares with the clause a stem that no other numbered
   part holds (a figure moved to the other entity matches no part of its own);
4. **marked words, both ways**: every negation, hedge, qualifier, scope, direction or
   temporal-order word of the clause (:data:`CLAIM_MARKED`) is in the sentence, and every
   negation, hedge, qualifier, scope or bound word ("at least", "nearly", "more than":
   :data:`PASSAGE_MARKED`) of each part of the
   sentence that shares a content stem with the clause is in the clause; a neighbouring
   sentence that opens by pointing back ("However, this was not significant") lends its
   negation and hedge words to the sentence before it and the one after it.

Everything else is at most ``partial``: a faithful paraphrase with other words is paid less
than an extraction (``docs/citation.md`` says so: the judge mode is for training).
Each sentence is read once per snippet text (``lru_cache``); a claim's work is linear in
its clauses times the sentences of its cited snippets.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property, lru_cache

from tribunal.citation.content import (
    CONVERSIONS,
    DIRECTIONS,
    HEDGES,
    NEGATIONS,
    Clause,
    Number,
    content_stems,
    numbers,
    stem,
)
from tribunal.citation.segment import sentences

_TOKEN = re.compile(r"[^\W_]+")
_PART_SPLIT = re.compile(
    r"[;:]\s+|,\s*(?:and|but|while|whereas|although|though|which|yet)\s+"
    r"|\s+(?:and|but|whereas|while|although)\s+|,\s+",
    re.IGNORECASE,
)


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


QUALIFIERS = _wordset(
    """all every each some most many few several only always never often usually rarely
    sometimes seldom mostly partly partially largely slightly significantly significant
    marginally modestly substantially entirely completely solely exclusively majority
    minority"""
)
"""Quantifiers and degree words: "some" for "all", a dropped "only" change the claim."""

SCOPE = _wordset(
    """mice mouse murine rat rats animal animals vitro vivo cell cells cultured subgroup
    subgroups subset subsets men women children adults elderly infants adolescents pregnant
    volunteers preliminary pilot observational retrospective"""
)
"""Scope words: a finding in mice, in vitro or in a subgroup is not one in everyone."""

TEMPORAL = _wordset("before after earlier later prior previously subsequently")
"""Temporal-order words."""

BOUNDS = _wordset(
    """least nearly almost approximately approx roughly around about than exceed exceeds
    exceeded exceeding below above"""
)
"""Bounds and approximations of a figure or a change: "at least doubled", "nearly 30 %",
"more than 12" stated as "doubled", "30 %", "12" is more than the passage says."""

CLAIM_MARKED = NEGATIONS | HEDGES | QUALIFIERS | SCOPE | TEMPORAL | BOUNDS | frozenset(DIRECTIONS)
"""Words of a claim that must be in its sentence (as stems)."""

PASSAGE_MARKED = NEGATIONS | HEDGES | QUALIFIERS | SCOPE | BOUNDS
"""Words of a passage's sentence (in a part the claim draws on) the claim may not drop."""

BACK_REFERENCES = _wordset(
    """however but yet this these that those it they such although though nevertheless
    nonetheless still"""
)
"""Opening words by which a sentence qualifies its neighbour."""


def _marked(tokens: Iterable[str], words: frozenset[str]) -> frozenset[str]:
    return frozenset(stem(t) for t in tokens if t in words)


def _tokens(text: str) -> list[str]:
    lowered = text.lower().replace("’", "'").replace("n't", " not")
    return _TOKEN.findall(lowered)


@dataclass(frozen=True)
class Part:
    """One part of a sentence (split at commas, ``;`` and conjunctions).

    Attributes:
        stems: Its content stems.
        numbers: Its numbers.
        marked: Stems of its :data:`PASSAGE_MARKED` words.
    """

    stems: frozenset[str]
    numbers: tuple[Number, ...]
    marked: frozenset[str]


class Sentence:
    """One sentence of a passage, read for :func:`extractive_support`; its parts' figures
    are read on first use (only a claim clause with a figure, against a sentence with two
    or more, needs them).

    Attributes:
        text: The sentence.
        stems: Content stems.
        all_stems: Stems of every word (marked words are compared on these).
        numbers: Its numbers.
        opens_back: It opens with a :data:`BACK_REFERENCES` word.
        marked_parts: Per part, its content stems and the stems of its
            :data:`PASSAGE_MARKED` words.
        lent: Negation and hedge stems its pointing-back neighbours lend it.
    """

    def __init__(self, text: str) -> None:
        tokens = _tokens(text)
        self.text = text
        self.stems = content_stems(text)
        self.all_stems = frozenset(stem(t) for t in tokens)
        self.numbers = numbers(text)
        self.opens_back = bool(tokens) and tokens[0] in BACK_REFERENCES
        self.lent: frozenset[str] = frozenset()
        self._pieces = [p for p in _PART_SPLIT.split(text) if p.strip()]
        self.marked_parts = tuple(
            (content_stems(p), _marked(_tokens(p), PASSAGE_MARKED)) for p in self._pieces
        )

    @cached_property
    def parts(self) -> tuple[Part, ...]:
        """Its parts, with their figures."""
        return tuple(
            Part(stems, numbers(p), marked)
            for p, (stems, marked) in zip(self._pieces, self.marked_parts, strict=True)
        )


@lru_cache(maxsize=1 << 14)
def _read_sentence(text: str) -> Sentence:
    """A sentence read once per text and process (snippets of one search repeat them)."""
    return Sentence(text)


@lru_cache(maxsize=2048)
def passage_sentences(text: str) -> tuple[Sentence, ...]:
    """The sentences of a passage, each with the negation and hedge words its pointing-back
    neighbours lend it (cached by text: a group's completions cite the same snippets)."""
    read = [_read_sentence(s) for s in sentences(text)]
    out = []
    for i, sentence in enumerate(read):
        lent: set[str] = set()
        for j in (i - 1, i + 1):
            if 0 <= j < len(read) and (read[j].opens_back if j > i else sentence.opens_back):
                lent |= {s for _, marked in read[j].marked_parts for s in marked if s in _NEG_HEDGE}
        if lent:  # a sentence read before (cached) is shared: lend to a copy
            sentence = copy.copy(sentence)
            sentence.lent = frozenset(lent)
        out.append(sentence)
    return tuple(out)


@lru_cache(maxsize=2048)
def _passage_stems(text: str) -> frozenset[str]:
    """Content stems of every sentence of a passage."""
    return frozenset().union(*(s.stems for s in passage_sentences(text)))


_NEG_HEDGE = frozenset(stem(w) for w in NEGATIONS | HEDGES)


def same_figure(claim: Number, passage: Iterable[Number]) -> bool:
    """Whether the passage states the claim's figure exactly: the same value (a relative
    1e-9 for float noise) in the same unit, or converted between units of one quantity of
    ``CONVERSIONS``; a unit on one side only never matches."""
    for other in passage:
        value = other.value
        if claim.unit != other.unit:
            mine, theirs = CONVERSIONS.get(claim.unit), CONVERSIONS.get(other.unit)
            if mine is None or theirs is None or mine[0] != theirs[0]:
                continue
            value = other.value * theirs[1] / mine[1]
        if abs(value - claim.value) <= 1e-9 * max(1.0, abs(claim.value)):
            return True
    return False


def _role_holds(clause: Clause, sentence: Sentence) -> bool:
    """Every figure of the clause sits in a part of the sentence that shares a stem of the
    clause no other numbered part holds (trivially true with one numbered part)."""
    if len(sentence.numbers) < 2:
        return True
    numbered = [p for p in sentence.parts if p.numbers]
    if len(numbered) < 2:
        return True
    for figure in clause.numbers:
        owners = [p for p in numbered if same_figure(figure, p.numbers)]
        if not any(
            clause.stems & (p.stems - frozenset().union(*(q.stems for q in numbered if q is not p)))
            for p in owners
        ):
            return False
    return True


def sentence_supports(
    clause: Clause, claim_marked: frozenset[str], sentence: Sentence, full: float
) -> bool:
    """Whether one sentence is positive evidence for one claim clause (rules 1-4 of the
    module docstring). ``claim_marked``: stems of the whole claim's marked words."""
    stems = clause.stems
    if stems and len(stems & sentence.stems) < full * len(stems):
        return False
    if not all(same_figure(n, sentence.numbers) for n in clause.numbers):
        return False
    if not _role_holds(clause, sentence):
        return False
    if not _marked(clause.tokens, CLAIM_MARKED) <= sentence.all_stems:
        return False
    drawn = [marked for part, marked in sentence.marked_parts if part & stems]
    required = frozenset().union(*drawn) | sentence.lent
    return required <= claim_marked


def claim_marked_stems(text: str) -> frozenset[str]:
    """Stems of every :data:`CLAIM_MARKED` word of a claim's text."""
    return _marked(_tokens(text), CLAIM_MARKED)


def extractive_support(
    text: str, parts: tuple[Clause, ...], snippets: Iterable[str], full: float = 1.0
) -> bool:
    """Whether one cited snippet is positive evidence for every clause of a claim.

    Args:
        text: The claim.
        parts: Its clauses (``tribunal.citation.content.clauses`` with anchors).
        snippets: The texts of its valid cited snippets.
        full: Share of each clause's content stems its sentence must hold (1.0: all).

    Returns:
        True when some single snippet has, for each clause, a sentence that supports it.
    """
    if not parts:
        return False
    marked = claim_marked_stems(text)
    for snippet in snippets:
        read = passage_sentences(snippet)
        if full >= 1.0:  # a cheap look first: some clause stem nowhere in the passage
            every = _passage_stems(snippet)
            if not all(c.stems <= every for c in parts):
                continue
        if all(any(sentence_supports(c, marked, s, full) for s in read) for c in parts):
            return True
    return False


def states_whole_sentences(text: str, parts: tuple[Clause, ...], snippet: str) -> bool:
    """Whether one snippet verifies a claim and the claim states whole sentences of it: each
    clause supported by a sentence of the snippet (rules 1-4, every content stem) whose
    every content stem and figure the claim states in turn.

    Stricter than :func:`extractive_support` in one direction: a claim that keeps a part of
    a sentence and drops the rest ("in patients with hyperprogression" dropped from "growth
    doubled in patients with hyperprogression", a restriction after a comma) is not
    verified here, whatever the marked-word lists know. The judge mode skips the judge only
    for such claims (``tribunal.citation.verifier``).

    Args:
        text: The claim.
        parts: Its clauses (``tribunal.citation.content.clauses`` with anchors).
        snippet: The text of one valid cited snippet.
    """
    if not parts:
        return False
    marked = claim_marked_stems(text)
    stems = frozenset().union(*(c.stems for c in parts))
    figures = [n for c in parts for n in c.numbers]

    def whole(sentence: Sentence) -> bool:
        return sentence.stems <= stems and all(same_figure(n, figures) for n in sentence.numbers)

    read = passage_sentences(snippet)
    return all(any(whole(s) and sentence_supports(c, marked, s, 1.0) for s in read) for c in parts)
