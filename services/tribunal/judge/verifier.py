"""``JudgeVerifier``: the rubric judge behind the core's ``Verifier`` protocol.

For each item: resolve its rubrics (its own, then the static sets it names or the service
default), serve what the verdict cache holds, share verdicts already being computed for
another item (identical completions in a GRPO group), ask the backend for the rest (one
call per rubric, or chunks of ``rubrics_per_call``), retry unreadable verdicts once, and
aggregate (``tribunal.judge.scorer``).

Failure policy: **an item with any failed rubric gets an error and no reward** (never a
partial reward over the rubrics that happened to succeed, which would silently change the
scoring rule per item). Its details keep every rubric's result, the failed ones with their
own error. The item's error is the first non-retryable rubric error if there is one
(retrying cannot help), else the first error; its message counts the failures.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from tribunal.core.lru import LRU
from tribunal.core.queue.base import JobQueue
from tribunal.core.queue.redis_connection import RedisConnection
from tribunal.core.verifier import score_each
from tribunal.judge.cache import call_digest, response_digest, verdict_key
from tribunal.judge.config import JudgeConfig
from tribunal.judge.prompts import PROMPT_VERSION, build_prompt, build_request, prompt_digest
from tribunal.judge.scorer import aggregate, reward_term
from tribunal.judge.verdict import ParsedVerdict, read_verdicts
from tribunal.llm import LLMBackend, create_backend
from tribunal.llm.limits import meter_limits, share_limits
from tribunal.llm.meter import BackendMeter
from tribunal.llm.readiness import backend_unready_reasons
from tribunal.llm.untrusted import ControlTokens
from tribunal.wire.envelope import ItemError, ItemOutcome, ScoreItem
from tribunal.wire.errors import BackendUnavailable, BadInput, ParseError, TribunalError
from tribunal.wire.hashing import canonical_json, config_hash
from tribunal.wire.judge import JudgeDetails, JudgeItem, JudgeUsage, RubricResult, RubricVerdict
from tribunal.wire.rubric_sets import load_rubric_set, rubric_sets_digest
from tribunal.wire.rubrics import Rubric

logger = logging.getLogger(__name__)

_RETRY_TEMPERATURE = 0.3
"""Parse retries sample at this temperature (a greedy retry would repeat the same answer)."""

Slot = ParsedVerdict | TribunalError | None


class JudgeVerifier:
    """Rubric judge: (question, response, rubrics) -> reward in [0, 1] with per-rubric details.

    Args:
        config: Domain configuration (backend, rubrics per call, aggregation, ...).
        backend: A ready-made backend (else ``start`` builds the one ``config`` names).
    """

    name = "judge"
    version = "1"
    item_model: type[ScoreItem] = JudgeItem
    details_model: Any = JudgeDetails

    def __init__(self, config: JudgeConfig, backend: LLMBackend | None = None) -> None:
        self.config = config
        self.backend: LLMBackend | None = backend
        self.cache: LRU[str, ParsedVerdict] = LRU(config.cache_max_items)
        self.control = ControlTokens(backend.control_tokens if backend else ())
        """The control tokens broken in every untrusted text (the backend's, once started)."""
        self._inflight: dict[str, asyncio.Future[ParsedVerdict]] = {}
        self._cpu: ThreadPoolExecutor | None = None  # large items' digests and prompts
        # Admission in front of prompt building: with 10,000 calls queued, only ~2x the
        # backend's concurrency have built prompts, so the first requests leave at once
        # instead of after every queued call has been prepared. 2x keeps the backend busy
        # while admitted calls back off between retries.
        self._admission = asyncio.Semaphore(2 * config.backend.max_concurrency)
        self.meter = BackendMeter(config.backend.max_concurrency, config.backend)
        self._context = canonical_json(
            {
                "prompt_version": PROMPT_VERSION,
                "prompt_digest": prompt_digest(),
                "backend": config.backend.hash_payload(),
                "rubrics_per_call": config.rubrics_per_call,
                "max_reason_chars": config.max_reason_chars,
            }
        )
        self._hash = config_hash(
            {
                "config": config.hash_payload(),
                "prompt_version": PROMPT_VERSION,
                "prompt_digest": prompt_digest(),
                "rubric_sets": rubric_sets_digest(),
            }
        )

    # -- Verifier protocol -------------------------------------------------------------

    def config_hash(self) -> str:
        """Hash of the config, prompt templates and every shipped rubric set."""
        return self._hash

    def backend_load(self) -> tuple[int, int]:
        """``(calls in flight, concurrency bound)`` of the backend."""
        return self.meter.load(self.backend)

    def take_stats(self) -> dict[str, int]:
        """The backend calls' counts and latencies since the last take."""
        return self.meter.tally.take()

    def cache_payload(self, item: ScoreItem) -> dict[str, Any] | None:
        """Question, response and the resolved rubrics (ids and groups do not matter)."""
        assert isinstance(item, JudgeItem)
        try:
            rubrics, _ = self.resolve_rubrics(item)
        except TribunalError:
            return None
        return {
            "question": item.question,
            "response": item.response,
            "rubrics": [r.to_dict() for r in rubrics],
        }

    async def start(self) -> None:
        """Build and start the backend (no network call: the server may come up later)."""
        if self.backend is None:
            self.backend = create_backend(self.config.backend, env_prefix="TRIBUNAL_JUDGE_")
        await self.backend.start()
        meter_limits(self.backend, self.meter.tally)
        self.control = ControlTokens(self.backend.control_tokens)
        logger.info(
            "judge backend %s model=%r ready; verdict schema %s; %d control tokens beyond the "
            "common families' are broken in untrusted text",
            self.backend.kind,
            self.backend.model,
            _schema_enforcement(self.backend.kind, self.config.backend.structured_output),
            len(self.control.tokens),
        )

    def attach_queue(self, queue: JobQueue, timeout_s: float) -> None:
        """Share the backend's per-minute limits with every worker on the queue's Redis (the
        memory queue's workers share one process's). ``timeout_s`` is not used."""
        if isinstance(queue, RedisConnection):
            share_limits(self.backend, queue.redis, queue.keys.prefix)

    async def unready_reasons(self) -> list[str]:
        """Why no item can be judged now: no backend configured, or its server unreachable
        ([] when it answers). Probed without starting the backend (an API process that
        leaves scoring to the workers has not started one)."""
        backend = self.backend or create_backend(self.config.backend, "TRIBUNAL_JUDGE_")
        return await backend_unready_reasons(backend)

    async def aclose(self) -> None:
        """Close the backend (and the thread of large items' prompt building)."""
        if self._cpu is not None:
            self._cpu.shutdown(wait=False, cancel_futures=True)
            self._cpu = None
        if self.backend is not None:
            await self.backend.aclose()

    async def score(self, items: Sequence[ScoreItem]) -> list[ItemOutcome]:
        """Score a batch; one outcome per item, in order. Items are judged concurrently."""
        if self.backend is None:
            await self.start()
        return await score_each(items, JudgeItem, self.score_item)

    # -- rubrics -----------------------------------------------------------------------

    def resolve_rubrics(self, item: JudgeItem) -> tuple[list[Rubric], list[str]]:
        """Return the item's rubrics (own, then static sets) and the set refs added.

        Raises:
            BadInput: The item ends up with no rubric at all.
        """
        try:
            rubrics = item.instance_rubrics()
        except ValueError as exc:
            raise BadInput(str(exc), field="rubrics") from None
        names = self.config.default_rubric_sets if item.rubric_sets is None else item.rubric_sets
        refs: list[str] = []
        for spec in names:
            rubric_set = load_rubric_set(spec)
            refs.append(rubric_set.ref)
            rubrics.extend(rubric_set.rubrics)
        if not rubrics:
            raise BadInput(
                "no rubrics: give `rubrics` or `rubric_sets` (this service has no default sets)",
                field="rubrics",
            )
        return rubrics, refs

    # -- one item ------------------------------------------------------------------------

    async def score_item(self, item: JudgeItem) -> ItemOutcome:
        """Judge one item against each of its rubrics (verdicts already asked for by another
        item in flight are awaited, not asked again) and aggregate them.

        Raises:
            BadInput: The item ends up with no rubric.
        """
        rubrics, refs = self.resolve_rubrics(item)
        base = await self._off_loop(
            _chars(item, rubrics), response_digest, self._context, item.question, item.response
        )
        calls = self._calls(len(rubrics))
        # A call of one rubric shares it with no other: its key needs no digest of the call.
        digests = {
            c: call_digest([(rubrics[j].text, rubrics[j].polarity.value) for j in c])
            if len(c) > 1
            else ""
            for c in set(calls)
        }
        keys = [
            verdict_key(base, r.text, r.polarity.value, digests[calls[i]])
            for i, r in enumerate(rubrics)
        ]
        slots: list[Slot] = [None] * len(rubrics)
        cached = [False] * len(rubrics)
        usage = JudgeUsage()
        waits: list[tuple[int, asyncio.Future[ParsedVerdict]]] = []
        mine: list[int] = []
        loop = asyncio.get_running_loop()
        for i, key in enumerate(keys):
            hit = self.cache.get(key)
            if hit is not None:
                slots[i], cached[i] = hit, True
            elif key in self._inflight:
                waits.append((i, self._inflight[key]))
            else:
                self._inflight[key] = loop.create_future()
                mine.append(i)
        try:
            await self._judge(item, rubrics, mine, slots, usage)
        finally:
            self._settle(mine, keys, slots)
        for i, future in waits:
            try:
                slots[i] = await asyncio.shield(future)
                cached[i] = True
            except TribunalError as exc:
                slots[i] = exc
        usage.cached_rubrics = sum(cached)
        usage.cost_usd = self.meter.charge_item(usage.prompt_tokens, usage.completion_tokens)
        return self._outcome(rubrics, refs, slots, cached, usage)

    def _calls(self, n: int) -> list[range]:
        """For each of an item's ``n`` rubrics, the rubrics asked in its call: fixed chunks of
        ``rubrics_per_call`` in order, whatever the cache holds (so its key can say them)."""
        k = self.config.rubrics_per_call
        return [range(i - i % k, min(i - i % k + k, n)) for i in range(n)]

    async def _off_loop(self, size: int, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` here when ``size`` is at most :data:`OFFLOAD_CHARS`, else in this
        verifier's one thread (one thread, not one per call, competes with the loop for the
        GIL)."""
        if size <= OFFLOAD_CHARS:
            return fn(*args)
        if self._cpu is None:
            self._cpu = ThreadPoolExecutor(1, thread_name_prefix="judge-prompts")
        return await asyncio.get_running_loop().run_in_executor(self._cpu, fn, *args)

    def _settle(self, mine: list[int], keys: list[str], slots: list[Slot]) -> None:
        """Publish this item's verdicts to the cache and to items waiting on them."""
        for i in mine:
            future = self._inflight.pop(keys[i])
            slot = slots[i]
            if isinstance(slot, ParsedVerdict):
                self.cache.put(keys[i], slot)
                future.set_result(slot)
            else:
                error = slot if slot is not None else BackendUnavailable("judge call cancelled")
                future.set_exception(error)
                future.exception()  # mark retrieved: nobody may be waiting on it

    async def _judge(
        self,
        item: JudgeItem,
        rubrics: list[Rubric],
        indices: list[int],
        slots: list[Slot],
        usage: JudgeUsage,
    ) -> None:
        """Fill ``slots[i]`` for ``i in indices``: each one's whole call (:meth:`_calls`: the
        chunk its key names, its cached members asked again), then parse retries."""
        calls = self._calls(len(rubrics))
        pending = indices
        for attempt in range(1 + self.config.parse_retries):
            if not pending:
                return
            chunks = sorted({calls[i] for i in pending}, key=lambda c: c.start)
            answers = await asyncio.gather(
                *(self._call(item, [rubrics[i] for i in c], attempt, usage) for c in chunks)
            )
            wanted = set(pending)
            for chunk, answer in zip(chunks, answers, strict=True):
                for i, slot in zip(chunk, answer, strict=True):
                    if i in wanted:
                        slots[i] = slot
            pending = [i for i in pending if isinstance(slots[i], ParseError)]

    async def _call(
        self, item: JudgeItem, rubrics: list[Rubric], attempt: int, usage: JudgeUsage
    ) -> list[ParsedVerdict | TribunalError]:
        """One backend call for 1..k rubrics of one response; errors become slot values."""
        async with self._admission:
            return await self._admitted_call(item, rubrics, attempt, usage)

    async def _admitted_call(
        self, item: JudgeItem, rubrics: list[Rubric], attempt: int, usage: JudgeUsage
    ) -> list[ParsedVerdict | TribunalError]:
        assert self.backend is not None
        prompt = await self._off_loop(
            _chars(item, rubrics), build_prompt, item.question, item.response, rubrics, self.control
        )
        budget = self.config.max_tokens_per_rubric * len(rubrics) + 32
        request = build_request(
            prompt,
            self.config.max_reason_chars,
            budget * (2 if attempt else 1),
            temperature=_RETRY_TEMPERATURE if attempt else None,
            seed=(self.config.backend.seed or 0) + attempt if attempt else None,
        )
        try:
            completion = await self.meter.complete(self.backend, request)
            usage.calls += 1
            usage.prompt_tokens += completion.prompt_tokens
            usage.completion_tokens += completion.completion_tokens
            verdicts = read_verdicts(completion, prompt.keys, self.config.max_reason_chars)
        except TribunalError as exc:
            return [exc] * len(rubrics)
        return [verdicts[key] for key in prompt.keys]

    def _outcome(
        self,
        rubrics: list[Rubric],
        refs: list[str],
        slots: list[Slot],
        cached: list[bool],
        usage: JudgeUsage,
    ) -> ItemOutcome:
        results: list[RubricResult] = []
        errors: list[TribunalError] = []
        scored: list[tuple[Rubric, float]] = []
        for index, (rubric, slot) in enumerate(zip(rubrics, slots, strict=True)):
            result = RubricResult(
                index=index,
                text=rubric.text,
                title=rubric.title,
                polarity=rubric.polarity,
                weight=rubric.weight,
                source=rubric.source,
                category=rubric.category,
                cached=cached[index],
            )
            if isinstance(slot, ParsedVerdict):
                result.verdict = RubricVerdict.from_level(slot.level, rubric.polarity)
                result.score = slot.score
                result.reward_term = reward_term(rubric, slot.score)
                result.score_source = slot.source
                result.verdict_probs = slot.probs
                result.verdict_flag = slot.flag
                result.reason = slot.reason or None
                scored.append((rubric, slot.score))
            else:
                error = slot if slot is not None else BackendUnavailable("rubric was not judged")
                result.error = ItemError.from_exception(error)
                errors.append(error)
            results.append(result)
        assert self.backend is not None
        details = JudgeDetails(
            rubrics=results,
            judge_model=self.backend.model,
            backend=self.backend.kind,
            prompt_version=PROMPT_VERSION,
            aggregation=self.config.aggregation,
            rubric_sets=refs,
            usage=usage,
        )
        if errors:
            return ItemOutcome.failed(_item_error(errors, len(rubrics)), details.to_dict())
        try:
            reward, raw = aggregate(scored, self.config.aggregation)
        except TribunalError as exc:
            return ItemOutcome.failed(exc, details.to_dict())
        details.raw_reward = raw
        return ItemOutcome(reward=reward, details=details.to_dict())


def _schema_enforcement(kind: str, structured_output: str) -> str:
    """Say whether the verdict schema is enforced (the docs list what holds only then)."""
    if kind == "transformers":
        return "enforced (the backend writes the JSON; the model picks only the verdicts)"
    if kind == "openai" and structured_output == "json_schema":
        return (
            "sent as response_format json_schema (enforced by vLLM / SGLang guided decoding; "
            "a hosted API that ignores response_format does not enforce it)"
        )
    return f"NOT enforced (structured_output={structured_output}): answers are read strictly"


def _item_error(errors: list[TribunalError], n_rubrics: int) -> TribunalError:
    """The error of an item whose rubrics failed: a non-retryable one wins."""
    first = next((e for e in errors if not e.retryable), errors[0])
    message = f"{len(errors)} of {n_rubrics} rubrics could not be judged; first: {first.message}"
    return type(first)(message, field=first.field, retry_after_s=first.retry_after_s)


T = TypeVar("T")

OFFLOAD_CHARS = 2_048
"""Text of one item (question, response, rubrics) above which its digest and prompts are
built in a thread, off the event loop: escaping and hashing are linear in that text, and at
this size they hold the loop well under a millisecond whatever the text holds (a text of
nothing but control-token starts included)."""


def _chars(item: JudgeItem, rubrics: list[Rubric]) -> int:
    return len(item.question or "") + len(item.response) + sum(len(r.text) for r in rubrics)
