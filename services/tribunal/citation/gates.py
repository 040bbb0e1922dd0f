"""Deterministic gates, checked before any model call.

- **Format**: one answer block, closed; citation tags balanced, not nested, each with ids
  and a claim. A response that fails gets a format report and, under a preset with
  ``format_gate``, reward 0; never a crash.
- **Ids**: the share of distinct cited ids that exist in the evidence (DR Tulu's
  ``score_citation_format``, rlresearch/dr-tulu@6188f34 ``utils/citation_utils.py``). An
  invented id is never sent to a model: its precision is 0, and a claim citing only invented
  ids has recall 0.
- **Size**: more claims, ids per citation or distinct ids than the configured limits is a
  ``bad_input`` naming the limit, before anything else is computed.
- **Question echo**: a cited claim whose words (nearly) all come from the question says
  nothing the question did not; it earns 0 without a model call (a claim "What is X?
  <cite id=…>X</cite>" would otherwise be "supported" by any snippet about X).
"""

from __future__ import annotations

from dataclasses import dataclass

from tribunal.citation.parse import ParsedAnswer, words
from tribunal.wire.errors import BadInput

_STOPWORD_TEXT = """
    a an the and or but if of to in on at by for with from as into about over under than
    then that this these those is are was were be been being has have had do does did not no
    it its they them their there here we our you your he she his her i me my what which
    who whom whose when where why how can could may might must shall should will would also
    such so very more most less least both each other all any some many much per via vs"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
"""Words that carry no claim content (for the echo gate and the lexical mode)."""

MIN_NOVEL_SHARE = 0.2
"""A cited claim needs at least this share of content words that are not in the question."""


@dataclass(frozen=True)
class FormatReport:
    """Whether an answer is well formed.

    Attributes:
        has_answer: The response has an ``<answer>`` block.
        answer_blocks: How many ``<answer>`` blocks it opens (1 is valid).
        answer_closed: The final block has its ``</answer>``.
        tag_problems: Malformed citation tags, as ``kind@offset`` strings.
    """

    has_answer: bool
    answer_blocks: int
    answer_closed: bool
    tag_problems: tuple[str, ...]

    @property
    def is_valid(self) -> bool:
        """One closed answer block whose citation tags are balanced, not nested, not empty."""
        return (
            self.has_answer
            and self.answer_blocks == 1
            and self.answer_closed
            and not self.tag_problems
        )


@dataclass(frozen=True)
class IdReport:
    """Which cited ids exist in the evidence.

    Attributes:
        cited: Distinct cited ids of the answer, in order of first citation.
        invalid: Those absent from the evidence.
        valid_share: ``(len(cited) - len(invalid)) / len(cited)`` in [0, 1]; 0 when nothing
            is cited (as DR Tulu scores it).
    """

    cited: tuple[str, ...]
    invalid: tuple[str, ...]
    valid_share: float


def check_format(parsed: ParsedAnswer) -> FormatReport:
    """Return the format report of a parsed answer."""
    return FormatReport(
        has_answer=parsed.answer is not None,
        answer_blocks=parsed.answer_blocks,
        answer_closed=parsed.answer_closed,
        tag_problems=tuple(f"{p.kind}@{p.offset}" for p in parsed.problems),
    )


def check_ids(parsed: ParsedAnswer, evidence: dict[str, str]) -> IdReport:
    """Return which of the answer's cited ids exist in ``evidence`` (linear in the ids)."""
    cited = list(dict.fromkeys(cid for claim in parsed.cited_claims for cid in claim.ids))
    invalid = tuple(cid for cid in cited if cid not in evidence)
    share = (len(cited) - len(invalid)) / len(cited) if cited else 0.0
    return IdReport(tuple(cited), invalid, share)


def check_limits(
    parsed: ParsedAnswer, max_claims: int, max_ids_per_claim: int, max_distinct_ids: int
) -> None:
    """Refuse an answer larger than the limits, naming the limit (linear in its claims).

    Raises:
        BadInput: (field ``response``) more claims than ``max_claims``, a tag with more ids
            than ``max_ids_per_claim``, or more distinct cited ids than ``max_distinct_ids``.
    """
    if len(parsed.claims) > max_claims:
        raise BadInput(
            f"response: the answer holds {len(parsed.claims)} claims; at most max_claims="
            f"{max_claims} (TRIBUNAL_CITATION_MAX_CLAIMS)",
            field="response",
        )
    distinct: set[str] = set()
    for claim in parsed.cited_claims:
        if len(claim.ids) > max_ids_per_claim:
            raise BadInput(
                f"response: a citation lists {len(claim.ids)} ids; at most max_ids_per_claim="
                f"{max_ids_per_claim} (TRIBUNAL_CITATION_MAX_IDS_PER_CLAIM)",
                field="response",
            )
        distinct.update(claim.ids)
        if len(distinct) > max_distinct_ids:
            raise BadInput(
                f"response: the answer cites more than max_distinct_ids="
                f"{max_distinct_ids} distinct ids (TRIBUNAL_CITATION_MAX_DISTINCT_IDS)",
                field="response",
            )


def content_words(text: str) -> set[str]:
    """The words of ``text`` that are not stopwords."""
    return {w for w in words(text) if w not in STOPWORDS}


def echoes_question(claim: str, question: str | None) -> bool:
    """Whether ``claim`` adds (almost) no content word to ``question``.

    Examples:
        >>> echoes_question("What is the incidence of HPD?", "What is the incidence of HPD?")
        True
        >>> echoes_question("HPD occurred in 9% of 131 patients.", "What is the incidence of HPD?")
        False
    """
    if not question:
        return False
    claim_words = content_words(claim)
    if not claim_words:
        return True
    novel = claim_words - content_words(question)
    return len(novel) / len(claim_words) < MIN_NOVEL_SHARE
