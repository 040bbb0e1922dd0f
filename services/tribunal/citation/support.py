"""Support modes: who decides whether cited snippets support a claim.

Every mode takes the claims of one answer that passed the deterministic gates
(``tribunal.citation.gates``) as :class:`~tribunal.wire.citation_verdicts.ClaimTask` s and returns
one :class:`~tribunal.wire.citation_verdicts.ClaimJudgment` per task, in order:

- ``lexical``: token overlap and content checks, no model (``tribunal.citation.lexical``,
  called by the verifier as a plain function, in a scoring process for large items);
- ``judge``: an LLM through ``tribunal.llm`` (``tribunal.citation.judge``);
- ``none``: nothing is judged; the verifier does not call a mode at all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from tribunal.wire.citation_verdicts import ClaimJudgment, ClaimTask


@dataclass
class SupportOutcome:
    """Judgments of one answer's claims, and what they cost.

    Attributes:
        judgments: One per task, in task order.
        calls: Model calls made (0 for lexical, and for claims served from the cache).
        prompt_tokens: Prompt tokens billed.
        completion_tokens: Completion tokens billed.
    """

    judgments: list[ClaimJudgment] = field(default_factory=list)
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


class ClaimJudge(Protocol):
    """A support mode: judges the claims of one answer."""

    async def judge(
        self, question: str, tasks: Sequence[ClaimTask], evidence: Mapping[str, str]
    ) -> SupportOutcome:
        """Return one judgment per task, in order.

        Args:
            question: The item's question ('' when absent).
            tasks: The claims to judge (cited ones with their valid snippets; uncited ones).
            evidence: All snippets of the item, ``{id: text}``.

        Raises:
            TribunalError: The mode could not judge (backend errors, unreadable verdicts);
                the item then gets an error, never a reward of 0.
        """
        ...
