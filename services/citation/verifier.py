"""``CitationVerifier``: the citation scorer behind the core's ``Verifier`` protocol.

Per item: parse the final answer block (``parse``), gather the evidence from the request
(``evidence``; never from the response), run
the deterministic gates (``gates``: format, ids, question echo), send the claims that passed
to the support mode (``support``; none for mode ``none`` or when the preset's format gate
already zeroes the reward), then score (``scorer``).

Failure policy: an error of the support mode (backend unreachable, refusal, unreadable
verdicts) makes the item an error with no reward, never a citation score of 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tribunal.citation.config import CitationConfig
from tribunal.citation.evidence import gather_evidence
from tribunal.citation.gates import (
    FormatReport,
    IdReport,
    check_format,
    check_ids,
    echoes_question,
)
from tribunal.citation.judge import PROMPT_VERSION, LLMSupport
from tribunal.citation.parse import Claim, parse_answer
from tribunal.citation.schemas import (
    CitationDetails,
    CitationItem,
    CitationUsage,
    ClaimResult,
    FormatDetails,
    SupportMode,
)
from tribunal.citation.scorer import (
    AnswerScore,
    ClaimGate,
    ClaimScore,
    PresetName,
    aggregate,
    score_claim,
)
from tribunal.citation.support import ClaimJudge, LexicalSupport, SupportOutcome
from tribunal.citation.verdicts import ClaimJudgment, ClaimTask
from tribunal.core.envelope import ItemOutcome, ScoreItem
from tribunal.core.errors import BackendUnavailable, TribunalError
from tribunal.core.hashing import config_hash
from tribunal.core.verifier import score_each

VERSION = "1"
"""Bump when the same input could get a different reward."""


@dataclass(frozen=True)
class _Plan:
    """One claim before judging: its invalid ids, its gate, and its task index (or None)."""

    claim: Claim
    invalid_ids: tuple[str, ...]
    gate: ClaimGate | None
    task: int | None


class CitationVerifier:
    """Citation precision, recall and F1 of an answer against its evidence; reward in [0, 1].

    Args:
        config: Domain configuration (default mode, preset, weights, lexical thresholds).
        judge: The ``judge`` support mode, or None when no LLM backend is configured (then
            ``judge`` items get ``backend_unavailable``).
        judge_hash: What moves the judge mode's verdicts (backend settings, batching), for
            ``config_hash``; the prompt version is added here.
    """

    name = "citation"
    version = VERSION
    item_model: type[ScoreItem] = CitationItem
    details_model: Any = CitationDetails

    def __init__(
        self,
        config: CitationConfig,
        judge: LLMSupport | None = None,
        *,
        judge_hash: dict[str, Any] | None = None,
    ) -> None:
        self.config = config
        self.judge = judge
        self._judge_hash = judge_hash or {}
        self._lexical = LexicalSupport(config.lexical)

    def config_hash(self) -> str:
        """Hash of the scoring settings and, for judge mode, model and prompt version."""
        judge = {**self._judge_hash, "prompt_version": PROMPT_VERSION} if self.judge else None
        return config_hash({"config": self.config.hash_payload(), "judge": judge})

    def cache_payload(self, item: ScoreItem) -> dict[str, Any] | None:
        """The response, evidence, question and options decide the reward."""
        return item.model_dump(
            include={"response", "evidence", "tool_output", "question", "options"}
        )

    async def start(self) -> None:
        """Open the judge mode's backend, if any."""
        if self.judge is not None:
            await self.judge.start()

    async def aclose(self) -> None:
        """Close the judge mode's backend, if any."""
        if self.judge is not None:
            await self.judge.aclose()

    async def score(self, items: Sequence[ScoreItem]) -> list[ItemOutcome]:
        """Score every item concurrently (judge calls of different items overlap); an item's
        ``TribunalError`` (no evidence, a limit exceeded) is its own outcome."""
        return await score_each(items, CitationItem, self.score_item)

    async def score_item(self, item: CitationItem) -> ItemOutcome:
        """Score one item; a support-mode error becomes the item's error.

        Raises:
            BadInput: (field ``evidence``) the request holds no snippet.
        """
        options = item.options
        mode: SupportMode = (options.support if options else None) or self.config.support
        preset = self.config.preset_named(
            (options.preset if options else None) or self.config.preset
        )
        parsed = parse_answer(item.response)
        evidence = gather_evidence(item.evidence, item.tool_output)
        fmt = check_format(parsed)
        ids = check_ids(parsed, evidence)
        plans, tasks = _plan(parsed.claims, evidence, item.question)
        judged = mode != "none" and (fmt.is_valid or not preset.format_gate)
        outcome = SupportOutcome()
        if judged and tasks:
            try:
                outcome = await self._mode(mode).judge(item.question or "", tasks, evidence)
            except TribunalError as exc:
                return ItemOutcome.failed(exc)
        scores = [_score(plan, outcome.judgments) for plan in plans]
        answer = aggregate(scores, fmt, ids, preset, judged=judged)
        details = self._details(mode, preset.name, fmt, ids, len(evidence), scores, answer, outcome)
        return ItemOutcome(reward=answer.reward, details=details.to_dict())

    def _mode(self, mode: SupportMode) -> ClaimJudge:
        if mode == "lexical":
            return self._lexical
        if self.judge is None:
            raise BackendUnavailable(
                "support mode 'judge' has no LLM backend: set TRIBUNAL_CITATION_BASE_URL "
                "(an OpenAI-compatible server) or send options.support='lexical'"
            )
        return self.judge

    def _details(
        self,
        mode: SupportMode,
        preset: PresetName,
        fmt: FormatReport,
        ids: IdReport,
        evidence_ids: int,
        scores: list[ClaimScore],
        answer: AnswerScore,
        outcome: SupportOutcome,
    ) -> CitationDetails:
        is_judge = mode == "judge" and self.judge is not None
        return CitationDetails(
            support_mode=mode,
            preset=preset,
            format=FormatDetails(
                valid=fmt.is_valid,
                has_answer=fmt.has_answer,
                answer_blocks=fmt.answer_blocks,
                answer_closed=fmt.answer_closed,
                tag_problems=list(fmt.tag_problems),
            ),
            evidence_ids=evidence_ids,
            cited_ids=list(ids.cited),
            invalid_ids=list(ids.invalid),
            valid_id_share=ids.valid_share,
            precision=answer.precision,
            recall=answer.recall,
            f1=answer.f1,
            f1_term=answer.f1_term,
            gate_passed=answer.gate_passed,
            claims=[_claim_result(i, s) for i, s in enumerate(scores)],
            judge_model=self.judge.backend.model if is_judge and self.judge else None,
            prompt_version=PROMPT_VERSION if is_judge else None,
            usage=CitationUsage(
                calls=outcome.calls,
                prompt_tokens=outcome.prompt_tokens,
                completion_tokens=outcome.completion_tokens,
                cached_claims=sum(1 for j in outcome.judgments if j.cached),
            ),
        )


def _plan(
    claims: Sequence[Claim], evidence: dict[str, str], question: str | None
) -> tuple[list[_Plan], list[ClaimTask]]:
    """Gate every claim; the ones that pass become tasks for the support mode."""
    plans: list[_Plan] = []
    tasks: list[ClaimTask] = []
    for claim in claims:
        invalid = tuple(cid for cid in claim.ids if cid not in evidence)
        gate: ClaimGate | None = None
        if claim.is_cited and len(invalid) == len(claim.ids):
            gate = "invalid_ids"
        elif claim.is_cited and echoes_question(claim.text, question):
            gate = "restates_question"
        if gate is not None:
            plans.append(_Plan(claim, invalid, gate, None))
            continue
        snippets = tuple((cid, evidence[cid]) for cid in claim.ids if cid in evidence)
        plans.append(_Plan(claim, invalid, None, len(tasks)))
        tasks.append(ClaimTask(claim.text, snippets))
    return plans, tasks


def _score(plan: _Plan, judgments: list[ClaimJudgment]) -> ClaimScore:
    judgment = judgments[plan.task] if plan.task is not None and judgments else None
    return score_claim(plan.claim, plan.invalid_ids, plan.gate, judgment)


def _claim_result(index: int, score: ClaimScore) -> ClaimResult:
    judgment = score.judgment
    return ClaimResult(
        index=index,
        text=score.claim.text,
        cited=score.claim.is_cited,
        ids=list(score.claim.ids),
        invalid_ids=list(score.invalid_ids),
        gate=score.gate,
        support=judgment.support if judgment else None,
        relevance=dict(judgment.relevance) if judgment else {},
        needs_citation=judgment.needs_citation if judgment else None,
        precision=score.precision,
        recall=score.recall,
        f1=score.f1,
        counted=score.counted,
        reason=(judgment.reason or None) if judgment else None,
        cached=judgment.cached if judgment else False,
    )
