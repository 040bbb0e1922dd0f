"""The ``lexical`` support mode: token overlap between a claim and its cited snippets.

No model: for CPU use, tests and as a baseline. ``coverage(c, S)`` is the share of the
claim's content words (stopwords dropped, a light suffix stemmer) found in the text ``S``.

- support by the union of cited snippets: ``supported`` when coverage ≥ ``full``,
  ``partial`` when ≥ ``partial``, else ``unsupported``;
- relevance of one snippet: ``relevant`` when its own coverage ≥ ``relevant``;
- an uncited sentence needs a citation when it holds a number, or when some evidence
  snippet covers it at least ``partial`` (it states what a source said).

Known issues:
    - Overlap cannot see negation or contradiction: "X does not cause Y" is "supported" by
      a snippet saying "X causes Y". On SciFact claims (``tests/citation/test_lexical.py``)
      the mode is only a little better than always answering "supported"; use ``judge``
      for training rewards.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tribunal.citation.gates import content_words
from tribunal.citation.verdicts import ClaimJudgment, ClaimTask, Relevance, SupportVerdict

_NUMBER = re.compile(r"\d")
_SUFFIXES = ("ing", "ed", "es", "s")


class LexicalThresholds(BaseModel):
    """Coverage thresholds in [0, 1] (``partial`` 0.5 is the accuracy optimum on SciFact)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    full: float = Field(default=0.8, ge=0, le=1, description="Coverage for 'supported'.")
    partial: float = Field(default=0.5, ge=0, le=1, description="Coverage for 'partial'.")
    relevant: float = Field(
        default=0.3, ge=0, le=1, description="Coverage of one snippet for 'relevant'."
    )

    @model_validator(mode="after")
    def _ordered(self) -> LexicalThresholds:
        if self.partial > self.full:
            raise ValueError("lexical thresholds need 0 <= partial <= full <= 1")
        return self


@lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """Strip one common English suffix from words longer than the suffix + 3.

    Examples:
        >>> [stem(w) for w in ("patients", "treated", "increasing", "is")]
        ['patient', 'treat', 'increas', 'is']
    """
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def stems(text: str) -> set[str]:
    """Stemmed content words of ``text`` (``stem`` is cached: vocabularies repeat)."""
    return set(map(stem, content_words(text)))


def coverage(claim: set[str], snippet: set[str]) -> float:
    """Share of the claim's stems present in the snippet's (0 for a claim without any)."""
    return len(claim & snippet) / len(claim) if claim else 0.0


def stem_evidence(evidence: Mapping[str, str]) -> dict[str, set[str]]:
    """Stem every snippet once per item: ``{id: stems}``."""
    return {sid: stems(text) for sid, text in evidence.items()}


def judge_all(
    tasks: Sequence[ClaimTask], evidence: Mapping[str, str], thresholds: LexicalThresholds
) -> list[ClaimJudgment]:
    """Judge every task of one answer (the ``lexical`` support mode: CPU only, no I/O).

    Args:
        tasks: The claims to judge, in order.
        evidence: All snippets of the item, ``{id: text}``.
        thresholds: Coverage thresholds.

    Returns:
        One judgment per task, in order.
    """
    stems = stem_evidence(evidence)
    return [judge_lexically(task, stems, thresholds) for task in tasks]


def judge_lexically(
    task: ClaimTask, evidence_stems: Mapping[str, set[str]], thresholds: LexicalThresholds
) -> ClaimJudgment:
    """Judge one claim by token overlap.

    Args:
        task: The claim and its valid cited snippets (none: an uncited sentence).
        evidence_stems: ``stem_evidence`` of all the item's snippets.
        thresholds: Coverage thresholds.

    Returns:
        Support and per-snippet relevance for a cited claim; ``needs_citation`` otherwise.
    """
    claim = stems(task.text)
    if not task.is_cited:
        needs = bool(_NUMBER.search(task.text)) or any(
            coverage(claim, snippet) >= thresholds.partial for snippet in evidence_stems.values()
        )
        return ClaimJudgment(needs_citation=needs)
    union: set[str] = set()
    relevance: dict[str, Relevance] = {}
    for sid, text in task.snippets:
        snippet = evidence_stems.get(sid) or stems(text)
        union |= snippet
        relevant = coverage(claim, snippet) >= thresholds.relevant
        relevance[sid] = Relevance.RELEVANT if relevant else Relevance.IRRELEVANT
    covered = coverage(claim, union)
    if covered >= thresholds.full:
        support = SupportVerdict.SUPPORTED
    elif covered >= thresholds.partial:
        support = SupportVerdict.PARTIAL
    else:
        support = SupportVerdict.UNSUPPORTED
    return ClaimJudgment(support=support, relevance=relevance)
