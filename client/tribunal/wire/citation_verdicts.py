"""The categorical outcomes of citation checks, and the judgments the support modes return."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class SupportVerdict(enum.StrEnum):
    """How far a claim's cited snippets, taken together, support it (its recall).

    Levels and values from DR Tulu's recall prompt (``[[Fully supported]]`` 1,
    ``[[Partially supported]]`` 0.5, ``[[No support]]`` 0; rlresearch/dr-tulu@6188f34
    ``utils/citation_utils.py``).
    """

    SUPPORTED = "supported"
    PARTIAL = "partial"
    UNSUPPORTED = "unsupported"

    @property
    def recall(self) -> float:
        """1, 0.5 or 0."""
        return {"supported": 1.0, "partial": 0.5, "unsupported": 0.0}[self.value]


class Relevance(enum.StrEnum):
    """Whether one cited snippet holds some key point of the claim (its precision share).

    Per cited snippet, as ALCE's citation precision (Gao et al. 2023, arXiv 2305.14627);
    DR Tulu asks once for the concatenation of all cited snippets, so citing every id with
    one relevant among them still reads "relevant" there.
    """

    RELEVANT = "relevant"
    IRRELEVANT = "irrelevant"


@dataclass(frozen=True)
class ClaimTask:
    """One claim to judge: its text and the valid snippets it cites (none: uncited).

    Attributes:
        text: The claim.
        snippets: ``{id: text}`` of its cited ids that exist in the evidence, in citation
            order; empty for an uncited sentence (then the question is whether it needs one).
    """

    text: str
    snippets: tuple[tuple[str, str], ...] = ()

    @property
    def is_cited(self) -> bool:
        """Whether the claim cites at least one valid snippet."""
        return bool(self.snippets)


@dataclass(frozen=True)
class ClaimJudgment:
    """A support mode's answer for one :class:`ClaimTask`.

    Attributes:
        support: For a cited claim: support by the union of its snippets; None otherwise.
        relevance: For a cited claim: per snippet id, relevant or not.
        needs_citation: For an uncited sentence: whether it states a fact that needs a
            citation (DR Tulu's ``[[Yes]]``); None for a cited claim.
        reason: The model's short reason ('' for the lexical mode).
        cached: Served from the support cache (no model call).
        on_topic: For a cited claim in the judge mode, when a question is given: whether the
            judge found it helps answer the question; None otherwise (the lexical mode
            decides on-topic by the claim's content stems).
    """

    support: SupportVerdict | None = None
    relevance: dict[str, Relevance] = field(default_factory=dict)
    needs_citation: bool | None = None
    reason: str = ""
    cached: bool = False
    on_topic: bool | None = None
