"""The ``lexical`` support mode: content checks and word overlap, no model.

For CPU use, tests and as a baseline. Every text is read by ``tribunal.citation.content``
(content stems, numbers, entities, clauses with their negation and direction words). A cited
claim is split into clauses; each clause is judged against **each** cited snippet alone:

- *contradicted* by a snippet when one of its numbers or entities is not in that snippet,
  or the snippet clause that best covers it (coverage ≥ ``partial``) differs in negation or
  in direction ("raises" / "lowers");
- otherwise ``supported`` by it when the share of its content stems found in that snippet
  (coverage) is ≥ ``full`` (and its direction words are decidable, and it hedges where that
  snippet clause hedges), ``partial`` when ≥ ``partial``.

A clause takes its best snippet. The claim is ``supported`` when every clause is,
``unsupported`` when a clause is contradicted and no cited snippet supports it even in part
(a changed figure, a swapped name, an added "not", a *chimera* whose figure comes from one
snippet and subject from another) or when no clause is supported at all, else ``partial``
(a true claim with a false clause appended, or what the rules cannot decide): never full.

- relevance of one snippet: ``relevant`` when its coverage of the claim is ≥ ``relevant``;
- an uncited sentence needs a citation when it asserts anything (a content word or a
  number), unless it only restates the question.

Known issues (see ``tribunal.citation.content`` for the rules' limits): a paraphrase with
synonyms the snippet does not use is paid ``partial``; the judge mode is the recommendation
for training rewards.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tribunal.citation.content import (
    Clause,
    Snippet,
    best_clause,
    clauses,
    content_stems,
    coverage,
    number_agrees,
    numbers,
    read_snippet,
    union_stems,
)
from tribunal.citation.extractive import extractive_support
from tribunal.citation.gates import MIN_NOVEL_SHARE
from tribunal.wire.citation_verdicts import ClaimJudgment, ClaimTask, Relevance, SupportVerdict


class LexicalThresholds(BaseModel):
    """Coverage thresholds in [0, 1] (``partial`` 0.5 is the accuracy optimum on SciFact)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    full: float = Field(
        default=1.0,
        ge=0,
        le=1,
        description="Share of a claim clause's content stems its one passage sentence must "
        "hold for 'supported' (1.0: every one; lower relaxes the default deny).",
    )
    partial: float = Field(default=0.5, ge=0, le=1, description="Coverage for 'partial'.")
    relevant: float = Field(
        default=0.3, ge=0, le=1, description="Coverage of one snippet for 'relevant'."
    )

    @model_validator(mode="after")
    def _ordered(self) -> LexicalThresholds:
        if self.partial > self.full:
            raise ValueError("lexical thresholds need 0 <= partial <= full <= 1")
        return self


class EvidenceFacts:
    """The snippets of one item, each read once and only when a claim cites it.

    Args:
        evidence: ``{id: text}``.
        cited: The ids the answer cites: their snippets give the proper words (entity
            look-up) and the known entities.

    Attributes:
        proper: Words the cited snippets write capitalised inside a sentence (a claim's
            first word is an entity when it is one of them).
        known: Entity words of the cited snippets: one missing from a snippet but known
            here was swapped in from another (a contradiction); one unknown may be an alias
            (undecided).
    """

    def __init__(self, evidence: Mapping[str, str], cited: Iterable[str]) -> None:
        self._texts = evidence
        self._stems: list[frozenset[str]] | None = None
        ids = [sid for sid in dict.fromkeys(cited) if sid in evidence]
        read = [self.facts(sid) for sid in ids]
        self._cited = read
        self.proper: frozenset[str] = frozenset().union(*(f.proper for f in read))

    @cached_property
    def known(self) -> frozenset[str]:
        """Entity words of the cited snippets (read on first use: only a claim naming an
        entity that its snippet lacks needs them)."""
        return frozenset().union(*(f.entities for f in self._cited))

    def facts(self, sid: str) -> Snippet:
        """The facts of snippet ``sid`` (``read_snippet``: read once per text and process)."""
        return read_snippet(self._texts[sid])

    def all_stems(self) -> list[frozenset[str]]:
        """Content stems of every snippet (for uncited sentences; computed on first use)."""
        if self._stems is None:
            self._stems = [content_stems(text) for text in self._texts.values()]
        return self._stems


def read_evidence(evidence: Mapping[str, str], tasks: Sequence[ClaimTask]) -> EvidenceFacts:
    """The evidence of an item for judging ``tasks`` (linear in the snippets they cite)."""
    return EvidenceFacts(evidence, (sid for task in tasks for sid, _ in task.snippets))


def judge_all(
    tasks: Sequence[ClaimTask],
    evidence: Mapping[str, str] | EvidenceFacts,
    thresholds: LexicalThresholds,
    question: str | None = None,
) -> list[ClaimJudgment]:
    """Judge every task of one answer (the ``lexical`` support mode: CPU only, no I/O).

    Args:
        tasks: The claims to judge, in order.
        evidence: All snippets of the item, ``{id: text}``, or ``read_evidence`` of them.
        thresholds: Coverage thresholds.
        question: The item's question: an uncited sentence that only restates it needs no
            citation.

    Returns:
        One judgment per task, in order.
    """
    if not isinstance(evidence, EvidenceFacts):
        evidence = read_evidence(evidence, tasks)
    asked = content_stems(question or "")
    return [judge_lexically(task, evidence, thresholds, asked) for task in tasks]


def judge_lexically(
    task: ClaimTask,
    evidence: EvidenceFacts,
    thresholds: LexicalThresholds,
    asked: frozenset[str] = frozenset(),
) -> ClaimJudgment:
    """Judge one claim by its content (see the module docstring).

    Args:
        task: The claim and its valid cited snippets (none: an uncited sentence).
        evidence: ``read_evidence`` of the item's snippets.
        thresholds: Coverage thresholds.
        asked: Content stems of the question.

    Returns:
        Support and per-snippet relevance for a cited claim; ``needs_citation`` otherwise.
    """
    if not task.is_cited:
        needs = needs_citation(task.text, evidence, thresholds, asked)
        return ClaimJudgment(needs_citation=needs)
    # A cited claim is judged clause by clause: its whole-text numbers and entities are not
    # needed (``read`` would find them too).
    parts = clauses(task.text, evidence.proper, anchors=True)
    stems = union_stems(parts)
    cited = {sid: evidence.facts(sid) for sid, _ in task.snippets}
    relevance = {
        sid: Relevance.RELEVANT
        if coverage(stems, snippet.stems) >= thresholds.relevant
        else Relevance.IRRELEVANT
        for sid, snippet in cited.items()
    }
    # Default deny: supported only on positive evidence (``extractive``); the content
    # checks below only tell partial from unsupported.
    if extractive_support(task.text, parts, (text for _, text in task.snippets), thresholds.full):
        return ClaimJudgment(support=SupportVerdict.SUPPORTED, relevance=relevance)
    verdicts = [_clause_verdict(c, cited.values(), evidence, thresholds) for c in parts]
    support = _combine(verdicts)
    if support is SupportVerdict.SUPPORTED:
        support = SupportVerdict.PARTIAL
    return ClaimJudgment(support=support, relevance=relevance)


def contradicted(task: ClaimTask, evidence: EvidenceFacts, thresholds: LexicalThresholds) -> bool:
    """Whether a cited claim has a clause its cited snippets contradict and none supports
    even in part: a number, a known entity, a negation or a direction differs (the judge
    mode's gate before any model call; the lexical mode calls such a claim unsupported)."""
    cited = [evidence.facts(sid) for sid, _ in task.snippets]
    return any(
        verdict is SupportVerdict.UNSUPPORTED and clash
        for verdict, clash in (
            _clause_verdict(c, cited, evidence, thresholds)
            for c in clauses(task.text, evidence.proper, anchors=True)
        )
    )


def needs_citation(
    text: str,
    evidence: EvidenceFacts,
    thresholds: LexicalThresholds,
    asked: frozenset[str],
) -> bool:
    """Whether an uncited sentence states a fact: it holds a content word or a number
    (in any language: a word the stemmer does not know is still a word), unless it only
    restates the question (``asked``: the question's content stems)."""
    stems = union_stems(clauses(text))
    if asked and stems and coverage(stems, asked) >= 1 - MIN_NOVEL_SHARE:
        return False
    # Default deny: a sentence with any content word or figure asserts something.
    return bool(stems) or bool(numbers(text))


def _clause_verdict(
    clause: Clause,
    snippets: Iterable[Snippet],
    evidence: EvidenceFacts,
    thresholds: LexicalThresholds,
) -> tuple[SupportVerdict, bool]:
    """The best verdict of one snippet for ``clause``, and whether a snippet that covers it
    at least ``partial`` contradicts it (a number differs, an entity of the evidence
    (``evidence.known``) is not in it, or negation or direction differs)."""
    best = SupportVerdict.UNSUPPORTED
    contradicted = False
    for snippet in snippets:
        cover = coverage(clause.stems, snippet.stems) if clause.stems else 1.0
        clash = not all(number_agrees(n, snippet.numbers) for n in clause.numbers)
        # A name missing here but present elsewhere in the evidence was swapped in; one found
        # nowhere may be an alias the rules cannot see: undecided, never full.
        missing = [e for e in clause.entities if e not in snippet.words]
        clash = clash or any(e in evidence.known for e in missing)
        undecided = bool(missing)
        aligned, aligned_cover = best_clause(clause, snippet)
        if aligned is not None and aligned_cover >= thresholds.partial:
            clash = clash or aligned.negated != clause.negated
            # Stating as certain what the snippet only hedges is more than it says.
            undecided = undecided or (aligned.hedged and not clause.hedged)
            if clause.directions and aligned.directions:
                clash = clash or not (clause.directions & aligned.directions)
            elif clause.directions and not (clause.direction_words & snippet.words):
                undecided = True
        if clash:
            contradicted = contradicted or cover >= thresholds.partial
            continue
        if cover >= thresholds.full and not undecided:
            return SupportVerdict.SUPPORTED, contradicted
        if cover >= thresholds.partial:
            best = SupportVerdict.PARTIAL
    return best, contradicted


def _combine(verdicts: Sequence[tuple[SupportVerdict, bool]]) -> SupportVerdict:
    """A claim is supported when every clause is; unsupported when a clause is contradicted
    and supported by no cited snippet, or when none is at least partly supported; else
    partial."""
    if not verdicts:
        return SupportVerdict.UNSUPPORTED
    if all(v is SupportVerdict.SUPPORTED for v, _ in verdicts):
        return SupportVerdict.SUPPORTED
    if any(v is SupportVerdict.UNSUPPORTED and clash for v, clash in verdicts):
        return SupportVerdict.UNSUPPORTED
    if any(v is not SupportVerdict.UNSUPPORTED for v, _ in verdicts):
        return SupportVerdict.PARTIAL
    return SupportVerdict.UNSUPPORTED
