"""``CitationVerifier``: the citation scorer behind the core's ``Verifier`` protocol.

Per item: parse the final answer block (``parse``), gather the evidence from the request
(``evidence``; never from the response), run
the deterministic gates (``gates``: format, ids, question echo), send the claims that passed
to the support mode (``support``; none for mode ``none`` or when the preset's format gate
already zeroes the reward), then score (``scorer``).

In mode ``judge``, a cited claim that every one of its valid cited snippets verifies by the
extractive check, stating whole sentences of it (``tribunal.citation.extractive.
states_whole_sentences``: each content stem, exact figure with its role, and marked word in
one sentence, and every content stem and figure of that sentence in the claim), is
``supported`` with every cited snippet relevant without asking the judge: the judge is
asked only what the rules cannot decide. Only its topic is still asked, when the item has a
question and the preset counts on-topic claims only (the judge decides topic in this mode).
A claim with a changed figure, an added or dropped negation, hedge or qualifier, a clause
more, or a second cited snippet that does not state it on its own is not verified and goes
to the judge. Each claim's ``decided_by`` in the details says which decided it.

Failure policy: an error of the support mode (backend unreachable, refusal, unreadable
verdicts) makes the item an error with no reward, never a citation score of 0.

Where the CPU work runs: everything but the model call (parsing, evidence, gates, the lexical
mode, scoring) is a module-level function of the item (:func:`score_offline` for modes
``lexical`` and ``none``, :func:`prepare` then :func:`finish` for ``judge``), and it always
runs in a ``DeadlinePool`` process under the ``timeout_s`` deadline, handed over smallest
item first (``tribunal.citation.dispatch``): the event loop never scores, so that no item,
and no request of many items, holds its heartbeats, a health check or another item. Its cost
is linear in the item's text (``docs/citation.md`` gives the bound).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from tribunal.citation.config import CitationConfig
from tribunal.citation.content import clauses, content_stems, numbers, union_stems
from tribunal.citation.dispatch import SmallestFirst
from tribunal.citation.evidence import gather_evidence
from tribunal.citation.extractive import claim_marked_stems, states_whole_sentences
from tribunal.citation.gates import (
    FormatReport,
    IdReport,
    check_format,
    check_ids,
    check_limits,
    echoes_question,
)
from tribunal.citation.judge import PROMPT_VERSION, LLMSupport
from tribunal.citation.lexical import EvidenceFacts, LexicalThresholds, contradicted, judge_all
from tribunal.citation.nli import PROMPT_VERSION as NLI_VERSION
from tribunal.citation.nli import NLISupport
from tribunal.citation.parse import Claim, parse_answer
from tribunal.citation.scorer import (
    AnswerScore,
    ClaimGate,
    ClaimScore,
    Preset,
    aggregate,
    score_claim,
)
from tribunal.citation.support import SupportOutcome
from tribunal.core.metrics import SEP
from tribunal.core.pool import DeadlinePool
from tribunal.core.queue.base import JobQueue
from tribunal.core.queue.redis_connection import RedisConnection
from tribunal.core.verifier import score_each
from tribunal.llm.limits import share_limits
from tribunal.llm.readiness import backend_unready_reasons
from tribunal.wire.citation import (
    CitationDetails,
    CitationItem,
    CitationUsage,
    ClaimResult,
    FormatDetails,
    SupportMode,
)
from tribunal.wire.citation_verdicts import ClaimJudgment, ClaimTask, Relevance, SupportVerdict
from tribunal.wire.envelope import ItemOutcome, ScoreItem
from tribunal.wire.errors import BackendUnavailable, InternalError
from tribunal.wire.hashing import config_hash

VERSION = "3"
"""Bump when the same input could get a different reward."""


T = TypeVar("T")

_WARM_UP = CitationItem(id="warm-up", response="", evidence={"S": ""})


@dataclass(frozen=True)
class _Plan:
    """One claim before judging: its invalid ids, its gate, its task index (or None), and
    whether the extractive check verified it (judge mode: its support is not asked)."""

    claim: Claim
    invalid_ids: tuple[str, ...]
    gate: ClaimGate | None
    task: int | None
    extractive: bool = False


@dataclass(frozen=True)
class Prepared:
    """An item after its deterministic work, before any model call (picklable).

    Attributes:
        mode: The support mode.
        preset: The reward formula.
        fmt: The format report.
        ids: The id report.
        evidence: The item's evidence, ``{id: text}``.
        plans: One per claim, in order.
        tasks: The claims the support mode judges.
        judged: Whether the support mode is asked at all (not mode ``none``, and not when
            the preset's format gate already zeroes the reward).
        topic_only: Indices of tasks the extractive check verified: only their topic is
            asked (judge mode).
        extractive: Claims the extractive check decided (judge mode), asked nothing or
            their topic only.
    """

    mode: SupportMode
    preset: Preset
    fmt: FormatReport
    ids: IdReport
    evidence: dict[str, str]
    plans: list[_Plan]
    tasks: list[ClaimTask]
    judged: bool
    topic_only: tuple[int, ...] = ()
    extractive: int = 0


def item_chars(item: CitationItem) -> int:
    """Characters of text one item brings (what its deterministic work is linear in)."""
    evidence = sum(len(k) + len(v) for k, v in (item.evidence or {}).items())
    return len(item.response) + len(item.tool_output or "") + evidence


def prepare(item: CitationItem, config: CitationConfig) -> Prepared:
    """Parse, gather the evidence, check the limits and gates, plan the claims.

    Raises:
        BadInput: No evidence in the request (field ``evidence``), or an answer over a size
            limit (field ``response``, naming the limit).
    """
    options = item.options
    mode: SupportMode = (options.support if options else None) or config.support
    preset = config.preset_named((options.preset if options else None) or config.preset)
    evidence = gather_evidence(item.evidence, item.tool_output)
    parsed = parse_answer(item.response)
    check_limits(parsed, config.max_claims, config.max_ids_per_claim, config.max_distinct_ids)
    fmt = check_format(parsed)
    ids = check_ids(parsed, evidence)
    plans, tasks = _plan(parsed.claims, evidence, item.question, preset, mode, config.lexical)
    judged = mode != "none" and (fmt.is_valid or not preset.format_gate)
    topic_only = tuple(p.task for p in plans if p.extractive and p.task is not None)
    extractive = sum(1 for p in plans if p.extractive)
    return Prepared(mode, preset, fmt, ids, evidence, plans, tasks, judged, topic_only, extractive)


def finish(
    prepared: Prepared,
    outcome: SupportOutcome,
    judge_model: str | None = None,
    prompt_version: str | None = None,
) -> ItemOutcome:
    """Score the claims from their judgments and build the item's outcome.

    Args:
        prepared: What :func:`prepare` returned.
        outcome: The support mode's judgments (empty when not judged).
        judge_model: The judge's model, for the details of a ``judge`` item.
        prompt_version: The judge's prompt version, likewise.
    """
    topic = prepared.preset.count_once_on_topic
    judged = prepared.judged
    scores = [_score(plan, outcome.judgments, topic, judged) for plan in prepared.plans]
    answer = aggregate(scores, prepared.fmt, prepared.ids, prepared.preset, judged=prepared.judged)
    details = _details(prepared, scores, answer, outcome, judge_model, prompt_version)
    return ItemOutcome(reward=answer.reward, details=details.to_dict())


def score_offline(item: CitationItem, config: CitationConfig) -> ItemOutcome:
    """Score one item of mode ``lexical`` or ``none`` entirely, without I/O (picklable, for a
    scoring process).

    Raises:
        BadInput: As :func:`prepare`.
    """
    prepared = prepare(item, config)
    outcome = SupportOutcome()
    if prepared.judged and prepared.tasks:
        judgments = judge_all(prepared.tasks, prepared.evidence, config.lexical, item.question)
        outcome = SupportOutcome(judgments)
    return finish(prepared, outcome)


class CitationVerifier:
    """Citation precision, recall and F1 of an answer against its evidence; reward in [0, 1].

    Args:
        config: Domain configuration (default mode, preset, weights, lexical thresholds).
        judge: The ``judge`` support mode, or None when no LLM backend is configured (then
            ``judge`` items get ``backend_unavailable``).
        judge_hash: What moves the judge mode's verdicts (backend settings, batching), for
            ``config_hash``; the prompt version is added here.
        processes: Scoring processes.
        timeout_s: Hard deadline of one item's work in a scoring process (s).
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
        nli: NLISupport | None = None,
        judge_hash: dict[str, Any] | None = None,
        processes: int = 1,
        timeout_s: float = 30.0,
    ) -> None:
        self.config = config
        self.judge = judge
        self.nli = nli
        self._judge_hash = judge_hash or {}
        self.processes = processes
        self.timeout_s = timeout_s
        self._pool: DeadlinePool | None = None
        self._calls: SmallestFirst | None = None

    def utilisation(self) -> tuple[int, int]:
        """``(busy, capacity)`` of the scoring processes."""
        return (self._pool.busy if self._pool is not None else 0), self.processes

    def backend_load(self) -> tuple[int, int]:
        """``(calls in flight, concurrency bound)`` of the judge mode's backend (``(0, 0)``
        without one)."""
        return self.judge.meter.load(self.judge.backend) if self.judge else (0, 0)

    def take_stats(self) -> dict[str, int]:
        """The judge mode's backend calls' counts and latencies since the last take."""
        return self.judge.meter.tally.take() if self.judge else {}

    def config_hash(self) -> str:
        """Hash of the scoring settings and, for judge mode, model and prompt version."""
        judge = {**self._judge_hash, "prompt_version": PROMPT_VERSION} if self.judge else None
        payload = {"config": self.config.hash_payload(), "judge": judge}
        if self.nli is not None:
            payload["nli"] = self.nli.hash_payload()
        return config_hash(payload)

    def cache_payload(self, item: ScoreItem) -> dict[str, Any] | None:
        """The response, evidence, question and options decide the reward."""
        return item.model_dump(
            include={"response", "evidence", "tool_output", "question", "options"}
        )

    async def start(self) -> None:
        """Start the scoring processes and open the judge mode's backend, if any."""
        self._pool = DeadlinePool(self.processes, preload=["tribunal.citation.verifier"])
        # Starting the forkserver and its processes blocks the caller for about a second:
        # pay it here, before the worker claims anything, not under a claimed item's heartbeat.
        await self._pool.run(item_chars, _WARM_UP, timeout_s=60)
        self._calls = SmallestFirst(self._pool, timeout_s=self.timeout_s)
        if self.judge is not None:
            await self.judge.start()
        if self.nli is not None:
            await self.nli.start()

    def attach_queue(self, queue: JobQueue, timeout_s: float) -> None:
        """Share the judge mode's per-minute limits with every worker on the queue's Redis
        (the memory queue's workers share one process's). ``timeout_s`` is not used."""
        if self.judge is not None and isinstance(queue, RedisConnection):
            share_limits(self.judge.backend, queue.redis, queue.keys.prefix)

    async def unready_reasons(self) -> list[str]:
        """Why the ``judge`` support mode cannot score now: no LLM backend configured, or its
        server unreachable ([] when it answers). The other modes need no backend."""
        if self.judge is None:
            return [
                "support mode 'judge' has no LLM backend: set TRIBUNAL_CITATION_BASE_URL "
                "(and TRIBUNAL_CITATION_MODEL); the other support modes score"
            ]
        reasons = await backend_unready_reasons(self.judge.backend)
        return [f"support mode 'judge': {reason}" for reason in reasons]

    async def aclose(self) -> None:
        """Stop the scoring processes and close the judge mode's backend, if any."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None
            self._calls = None
        if self.judge is not None:
            await self.judge.aclose()
        if self.nli is not None:
            await self.nli.aclose()

    async def score(self, items: Sequence[ScoreItem]) -> list[ItemOutcome]:
        """Score every item concurrently (judge calls of different items overlap); an item's
        ``TribunalError`` (no evidence, a limit exceeded) is its own outcome."""
        return await score_each(items, CitationItem, self.score_item)

    async def score_item(self, item: CitationItem) -> ItemOutcome:
        """Score one item; a support-mode error becomes the item's error.

        Raises:
            BadInput: (field ``evidence``) the request holds no snippet; (field ``response``)
                the answer is over a size limit.
            ScoringTimeout: Its checks overran ``timeout_s`` in a scoring process.
            InternalError: Called before :meth:`start` (no scoring process to run it).
        """
        options = item.options
        mode = (options.support if options else None) or self.config.support
        size = item_chars(item)
        if mode not in ("judge", "nli"):
            return await self._offline(size, score_offline, item, self.config)
        prepared = await self._offline(size, prepare, item, self.config)
        if not (prepared.judged and (prepared.tasks or prepared.extractive)):
            return await self._offline(size, finish, prepared, SupportOutcome())
        if mode == "nli":
            if self.nli is None:
                raise BackendUnavailable(
                    "support mode 'nli' has no model: set TRIBUNAL_CITATION_NLI_MODEL (a local "
                    "directory of a sequence-classification model) or send "
                    "options.support='lexical'"
                )
            question = item.question or ""
            found = await self.nli.judge(question, prepared.tasks, prepared.evidence)
            return await self._offline(
                size, finish, prepared, found, self.nli.model_path, NLI_VERSION
            )
        if self.judge is None:
            raise BackendUnavailable(
                "support mode 'judge' has no LLM backend: set TRIBUNAL_CITATION_BASE_URL "
                "(an OpenAI-compatible server) or send options.support='lexical'"
            )
        outcome = SupportOutcome()
        if prepared.tasks:
            outcome = await self.judge.judge(
                item.question or "", prepared.tasks, prepared.evidence, prepared.topic_only
            )
        # Counted from the prepared item's totals (the loop does no per-claim work).
        tally = self.judge.meter.tally
        tally.add(f"claims_decided{SEP}extractive", prepared.extractive)
        tally.add(f"claims_decided{SEP}judge", len(prepared.tasks) - len(prepared.topic_only))
        model = self.judge.backend.model
        return await self._offline(size, finish, prepared, outcome, model, PROMPT_VERSION)

    async def _offline(self, size: int, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in a scoring process under the deadline, smallest item first."""
        if self._calls is None:
            raise InternalError("CitationVerifier.start() was not called: no scoring process")
        return await self._calls.run(size, fn, *args)


def _details(
    prepared: Prepared,
    scores: list[ClaimScore],
    answer: AnswerScore,
    outcome: SupportOutcome,
    judge_model: str | None,
    prompt_version: str | None,
) -> CitationDetails:
    fmt, ids = prepared.fmt, prepared.ids
    return CitationDetails(
        support_mode=prepared.mode,
        preset=prepared.preset.name,
        format=FormatDetails(
            valid=fmt.is_valid,
            has_answer=fmt.has_answer,
            answer_blocks=fmt.answer_blocks,
            answer_closed=fmt.answer_closed,
            tag_problems=list(fmt.tag_problems),
        ),
        evidence_ids=len(prepared.evidence),
        cited_ids=list(ids.cited),
        invalid_ids=list(ids.invalid),
        valid_id_share=ids.valid_share,
        precision=answer.precision,
        recall=answer.recall,
        f1=answer.f1,
        f1_term=answer.f1_term,
        gate_passed=answer.gate_passed,
        claims=[
            _claim_result(i, s, plan.extractive, prepared.mode)
            for i, (s, plan) in enumerate(zip(scores, prepared.plans, strict=True))
        ],
        judge_model=judge_model,
        prompt_version=prompt_version,
        usage=CitationUsage(
            calls=outcome.calls,
            prompt_tokens=outcome.prompt_tokens,
            completion_tokens=outcome.completion_tokens,
            cached_claims=sum(1 for j in outcome.judgments if j.cached),
            extractive_claims=prepared.extractive,
        ),
    )


def _plan(
    claims: Sequence[Claim],
    evidence: dict[str, str],
    question: str | None,
    preset: Preset,
    mode: SupportMode,
    thresholds: LexicalThresholds,
) -> tuple[list[_Plan], list[ClaimTask]]:
    """Gate every claim; the ones that pass (and ``off_topic`` ones) become tasks for the
    support mode. In mode ``judge`` a claim its snippets contradict is gated here, before
    any model call."""
    plans: list[_Plan] = []
    tasks: list[ClaimTask] = []
    count_once = preset.count_once_on_topic
    asked = content_stems(question or "")
    cited = (cid for claim in claims for cid in claim.ids)
    facts = EvidenceFacts(evidence, cited) if mode == "judge" else None
    seen: set[_Key] = set()
    snippet_stems: dict[str, frozenset[str]] = {}
    for claim in claims:
        invalid = tuple(cid for cid in claim.ids if cid not in evidence)
        snippets = tuple((cid, evidence[cid]) for cid in claim.ids if cid in evidence)
        stems = content_stems(claim.text)
        figures = frozenset((n.value, n.unit) for n in numbers(claim.text))
        key = (stems, figures, claim_marked_stems(claim.text))
        gate: ClaimGate | None = None
        if count_once and (stems or key[1]) and _repeats(key, seen):
            gate = "duplicate"
        elif claim.is_cited and not snippets:
            gate = "invalid_ids"
        elif claim.is_cited and echoes_question(claim.text, question):
            gate = "restates_question"
        elif facts is not None and contradicted(ClaimTask(claim.text, snippets), facts, thresholds):
            gate = "contradicts_evidence"
        seen.add(key)
        extractive = (
            facts is not None
            and gate is None
            and claim.is_cited
            and _verified(claim, snippets, facts)
        )
        # The judge mode asks the judge whether a cited claim helps answer the question
        # (``_score``); the lexical mode decides it by the content stems of the claim and
        # of its cited snippets (a pronoun subject, "It spans 1,280 m.", names nothing the
        # question does, but its snippet does).
        lexical_topic = (
            mode != "judge"
            and asked
            and not (stems & asked)
            and not any(
                _stems_of_snippet(snippet_stems, sid, text) & asked for sid, text in snippets
            )
        )
        if gate is None and count_once and claim.is_cited and lexical_topic:
            gate = "off_topic"  # judged: it earns nothing either way (see the scorer)
        elif gate is not None:
            plans.append(_Plan(claim, invalid, gate, None))
            continue
        if extractive and not (count_once and question):
            plans.append(_Plan(claim, invalid, None, None, extractive=True))
            continue
        plans.append(_Plan(claim, invalid, gate, len(tasks), extractive))
        tasks.append(ClaimTask(claim.text, snippets))
    return plans, tasks


def _verified(claim: Claim, snippets: tuple[tuple[str, str], ...], facts: EvidenceFacts) -> bool:
    """Whether EVERY valid cited snippet, on its own, verifies the claim extractively and
    the claim states whole sentences of it (``extractive.states_whole_sentences``: every
    content stem, at full coverage whatever ``TRIBUNAL_CITATION_LEXICAL_FULL`` relaxes in
    lexical mode, and nothing of the sentence dropped): then it is supported, and each of
    its citations relevant, without the judge. A claim citing a second snippet that does
    not state it is asked (that snippet's relevance is the judge's to give)."""
    if not snippets:
        return False
    parts = clauses(claim.text, facts.proper, anchors=True)
    stems = union_stems(parts)
    # A cheap look first, on the snippet's facts the contradiction gate has read: a stem of
    # the claim the snippet lacks (most claims) needs no sentence of it segmented.
    return all(stems <= facts.facts(sid).stems for sid, _ in snippets) and all(
        states_whole_sentences(claim.text, parts, text) for _, text in snippets
    )


def _stems_of_snippet(seen: dict[str, frozenset[str]], sid: str, text: str) -> frozenset[str]:
    """Content stems of one snippet, read once per item."""
    if sid not in seen:
        seen[sid] = content_stems(text)
    return seen[sid]


NEAR_DUPLICATE = 0.8
"""Jaccard overlap of content stems (same numbers) from which a claim repeats an earlier one."""


_Key = tuple[frozenset[str], frozenset[tuple[float, str]], frozenset[str]]
"""What a claim says, for duplicates: content stems, figures (value, unit), and the stems of
its negation, hedge, qualifier, scope, direction and temporal words: a restatement that
changes any of these contradicts or qualifies the first statement and is judged, never
dropped as a repeat."""


def _repeats(key: _Key, seen: set[_Key]) -> bool:
    """Whether a claim repeats an earlier one: the same key, or stems overlapping at least
    ``NEAR_DUPLICATE`` with the same figures and marked words. Quadratic in the claims, which
    ``max_claims`` bounds (256² set comparisons at most)."""
    if key in seen:
        return True
    stems, values, marked = key
    for other, other_values, other_marked in seen:
        union = len(stems | other)
        same = (other_values, other_marked) == (values, marked)
        if same and union and len(stems & other) / union >= NEAR_DUPLICATE:
            return True
    return False


def _score(
    plan: _Plan, judgments: list[ClaimJudgment], on_topic_only: bool, judged: bool
) -> ClaimScore:
    """Score one planned claim; with ``on_topic_only`` (the preset's ``count_once_on_topic``)
    a claim the judge found not to help answer the question is ``off_topic``. A claim the
    extractive check verified is supported, every valid citation relevant, with the judge's
    topic verdict when one was asked."""
    judgment = judgments[plan.task] if plan.task is not None and judgments else None
    if plan.extractive and judged:
        valid = (cid for cid in plan.claim.ids if cid not in plan.invalid_ids)
        judgment = ClaimJudgment(
            SupportVerdict.SUPPORTED,
            dict.fromkeys(valid, Relevance.RELEVANT),
            reason=judgment.reason if judgment else "",
            cached=judgment.cached if judgment else False,
            on_topic=judgment.on_topic if judgment else None,
        )
    gate = plan.gate
    if gate is None and on_topic_only and judgment is not None and judgment.on_topic is False:
        gate = "off_topic"
    return score_claim(plan.claim, plan.invalid_ids, gate, judgment)


def _claim_result(
    index: int, score: ClaimScore, extractive: bool, mode: SupportMode
) -> ClaimResult:
    judgment = score.judgment
    decided_by = None
    if judgment is not None:
        decided_by = "extractive" if extractive else mode
    return ClaimResult(
        decided_by=decided_by,
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
