"""``GatewayVerifier``: mixed items and reward specs, fanned out to the verifiers.

The gateway is a core ``Verifier`` whose scoring is remote calls (run by the API process for
``POST /v1/score`` and ``/get_reward``, by the gateway's queue worker for jobs): it takes a
batch of items, each naming a ``verifier`` (passed through) or a reward ``spec`` (split into
its components), sends **one request per verifier per phase** through ``tribunal.client``,
and joins the results back in request order. Phase 1 scores the direct items and every spec's
gates; phase 2 scores the other components of the items whose gates are open, so a closed
format gate costs no judge call.

Failure policy: a request to a verifier that fails as a whole (unreachable, 503, timeout)
gives every item of it that verifier's error (``backend_unavailable``: retryable); a spec
then applies its ``on_error`` policy. Nothing becomes a reward of 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, ClassVar, Protocol, TypeVar

import orjson
from pydantic import BaseModel, ValidationError, create_model

from tribunal.core.metrics import MICRO, NANO, REWARD_BUCKETS, SEP, Tally
from tribunal.core.queue.base import JobQueue
from tribunal.gateway.audit import (
    Auditor,
    AuditStore,
    build_audit_store,
    report,
    signature_report,
)
from tribunal.gateway.budget import budget_error, spend_key, spent_specs
from tribunal.gateway.builtins import BUILTINS
from tribunal.gateway.plan import build_inputs, component_item_id, resolve_source
from tribunal.gateway.remote import InFlightItems
from tribunal.gateway.scorer import ComponentResult, combine, gate_closed
from tribunal.gateway.specs import LoadedSpec, Source
from tribunal.wire.envelope import (
    ItemError,
    ItemOutcome,
    ItemResult,
    ScoreItem,
    VerifierInfo,
    result_json,
)
from tribunal.wire.errors import BadInput, InternalError, TribunalError
from tribunal.wire.gateway import GatewayDetails, GatewayItem, ItemAudit
from tribunal.wire.hashing import config_hash

_ITEM_MODELS = {
    "math": "tribunal.wire.math:MathItem",
    "code": "tribunal.wire.code:CodeItem",
    "judge": "tribunal.wire.judge:JudgeItem",
    "citation": "tribunal.wire.citation:CitationItem",
}
_FIELD_PREFIX = re.compile(r"^items\.\d+\.?")


class VerifierClient(Protocol):
    """What the gateway needs from ``tribunal.client``: score a batch on one verifier.

    ``score`` returns one result per item in order, as the verifier wrote it (decoded
    ``ItemResult`` JSON, not validated: the gateway validates what it reads, and passes a
    verifier's result on unchanged where it can), and raises a ``TribunalError`` when the
    request fails as a whole.
    """

    async def score(self, verifier: str, items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Score ``items`` with ``verifier``."""
        ...

    async def aclose(self) -> None:
        """Close connections."""
        ...


@cache
def item_model(verifier: str) -> type[BaseModel] | None:
    """The verifier's item model when its package is installed here, else None (its items
    are then checked by the verifier itself)."""
    module, _, name = _ITEM_MODELS[verifier].partition(":")
    try:
        model: type[BaseModel] = getattr(importlib.import_module(module), name)
    except ImportError:
        return None
    return model


def _validation_message(exc: ValidationError) -> tuple[str, str]:
    first = exc.errors()[0]
    path = ".".join(str(p) for p in first["loc"])
    return path, f"{path}: {first['msg']}" if path else str(first["msg"])


_Bound = TypeVar("_Bound", GatewayItem, ItemAudit)


def _bound_to(base: type[_Bound], specs: Mapping[str, LoadedSpec]) -> type[_Bound]:
    """``base`` with its ``known_specs`` set to ``specs``' names, under ``base``'s own name
    and docstring: its JSON schema is the same, so an OpenAPI document that shows both shows
    one model of that name."""
    model: type[_Bound] = create_model(
        base.__name__,
        __base__=base,
        __doc__=base.__doc__,
        known_specs=(ClassVar[tuple[str, ...]], tuple(specs)),
    )
    return model


def bind_item_model(specs: Mapping[str, LoadedSpec]) -> type[GatewayItem]:
    """``GatewayItem`` that also checks that its spec exists.

    A verifier item's own fields are checked by that verifier (its API validates every item
    anyway); checking them here too cost a fifth of the gateway's CPU per item.
    """
    return _bound_to(GatewayItem, specs)


def bind_audit_model(specs: Mapping[str, LoadedSpec]) -> type[ItemAudit]:
    """``ItemAudit`` that also checks that its auditor spec is one of ``specs`` (a job's
    batch ``audit``: refused as ``audit.spec``, naming the known specs)."""
    return _bound_to(ItemAudit, specs)


Answer = dict[str, Any] | ItemError
"""What a verifier gave one item: its result as it wrote it (decoded ``ItemResult`` JSON),
or the error of a request that failed as a whole."""


@dataclass
class _Calls:
    """Downstream items of one phase, grouped by verifier, each with where its result goes."""

    items: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    sinks: dict[str, list[Callable[[Answer], None]]] = field(default_factory=dict)

    def add(self, verifier: str, item: dict[str, Any], sink: Callable[[Answer], None]) -> None:
        self.items.setdefault(verifier, []).append(item)
        self.sinks.setdefault(verifier, []).append(sink)

    async def run(self, client: VerifierClient) -> None:
        await asyncio.gather(*(self._one(client, v) for v in self.items))

    async def _one(self, client: VerifierClient, verifier: str) -> None:
        sinks = self.sinks[verifier]
        try:
            results = await client.score(verifier, self.items[verifier])
            if len(results) != len(sinks):
                raise InternalError(f"{verifier} answered {len(results)} results for {len(sinks)}")
        except BadInput as exc:
            # A verifier refuses a batch whole for its shape, and one of a release before
            # issue 36 also when no item of it is valid: give each item its own reason where
            # its schema is known here.
            for item, sink in zip(self.items[verifier], sinks, strict=True):
                sink(_own_error(verifier, item, exc))
            return
        except TribunalError as exc:
            error = ItemError.from_exception(exc)
            error.message = f"{verifier}: {error.message}"
            for sink in sinks:
                sink(error)
            return
        for sink, result in zip(sinks, results, strict=True):
            sink(result)


def _own_error(verifier: str, item: dict[str, Any], exc: BadInput) -> ItemError:
    """The error of one item of a batch the verifier refused whole."""
    model = item_model(verifier)
    if model is not None:
        try:
            model.model_validate(item)
        except ValidationError as own:
            path, message = _validation_message(own)
            return ItemError.from_exception(BadInput(message, field=path or None))
    return _rebase_error(ItemError.from_exception(exc)) or ItemError.from_exception(exc)


def _rebase_error(error: ItemError | None) -> ItemError | None:
    """A downstream error without its ``items.<k>.`` prefix (``k`` is the item's position
    in the gateway's request to that verifier, which means nothing to the caller)."""
    if error is None or error.field is None:
        return error
    field = _FIELD_PREFIX.sub("", error.field) or None
    message = error.message
    if message.startswith(f"{error.field}: "):
        message = f"{field}: " + message[len(error.field) + 2 :] if field else message
    return error.model_copy(update={"field": field, "message": message})


def _typed(verifier: str, answer: Answer) -> ItemResult | ItemError:
    """A verifier's answer as a validated ``ItemResult``, or the error that it is not one."""
    if isinstance(answer, ItemError):
        return answer
    try:
        return ItemResult.model_validate(answer)
    except ValidationError as exc:
        _, message = _validation_message(exc)
        error = InternalError(f"{verifier} answered a malformed result: {message}")
        return ItemError.from_exception(error)


def _passthrough(result: ItemResult | ItemError) -> ItemOutcome:
    if isinstance(result, ItemError):
        return ItemOutcome(reward=None, error=result)
    return ItemOutcome(
        reward=result.reward,
        error=_rebase_error(result.error),
        details=result.details,
        verifier=result.verifier,
        cached=result.cached,
    )


@dataclass
class _SpecItem:
    """A spec item being scored: its rollout and the component results so far."""

    item: GatewayItem
    loaded: LoadedSpec
    rollout: dict[str, Any]
    results: dict[str, ComponentResult] = field(default_factory=dict)


class GatewayVerifier:
    """Scores mixed verifier items and reward-spec rollouts through the verifiers' APIs.

    Args:
        specs: The reward specs it serves, by name.
        client_factory: Builds the client to the verifiers (called by ``start``).
        max_inflight_items: The API process's bound on items its synchronous routes score at
            once (``TRIBUNAL_GATEWAY_MAX_INFLIGHT_ITEMS``), held in ``in_flight``.
        probe: Answers why some verifier cannot score now (``unready_reasons``); None: the
            gateway does not know where its verifiers are, and reports nothing.
    """

    name = "gateway"
    version = "1"
    details_model: Any = GatewayDetails

    def __init__(
        self,
        specs: Mapping[str, LoadedSpec],
        client_factory: Callable[[], VerifierClient],
        max_inflight_items: int = 2048,
        probe: Callable[[], Awaitable[list[str]]] | None = None,
    ) -> None:
        self._probe = probe
        self.specs = dict(specs)
        self.in_flight = InFlightItems(max_inflight_items)
        self.item_model: type[ScoreItem] = bind_item_model(self.specs)
        self.audit_model: type[ItemAudit] = bind_audit_model(self.specs)
        self._client_factory = client_factory
        self.client: VerifierClient | None = None
        self._hash = config_hash({n: s.hash for n, s in sorted(self.specs.items())})
        self.tally = Tally()
        # spec -> time.monotonic() of the last truncated-prompt warning (routes.py)
        self.truncation_logged: dict[str, float] = {}
        # Built by the API process on first use (tribunal.gateway.routes.auditor_of): the
        # audits run where the synchronous routes answer.
        self.auditor: Auditor | None = None
        # Where the audits and signatures of every process on the same queue meet
        # (audit_store): read by the reports even where this process has audited nothing.
        self._store: AuditStore | None = None
        self._audits_jobs = False
        # The queue of the gateway's worker (attach_queue): its stats hold the specs' spend.
        self._queue: JobQueue | None = None

    def config_hash(self) -> str:
        """Hash of the served specs (downstream results carry their verifiers' own)."""
        return self._hash

    def take_stats(self) -> dict[str, int]:
        """Each spec's items by outcome, errors by class, rewards (histogram, sum of squares)
        and components' rewards, since the last take (``tribunal_spec_*`` in /metrics)."""
        return self.tally.take()

    def spec_rule(self, name: str) -> dict[str, Any] | None:
        """How spec ``name`` combines its components, for the reward inspector's detail
        view: ``{"version", "combine", "formula", "on_error", "weights", "gates"}``; None
        for a spec this gateway does not serve."""
        loaded = self.specs.get(name)
        if loaded is None:
            return None
        spec = loaded.spec
        return {
            "version": spec.version,
            "combine": spec.combine,
            "formula": spec.formula,
            "on_error": spec.on_error,
            "weights": {n: c.weight for n, c in spec.components.items() if c.gate is None},
            "gates": {
                n: c.gate.model_dump() for n, c in spec.components.items() if c.gate is not None
            },
        }

    def audit_store(self, queue: JobQueue) -> AuditStore:
        """The store of this gateway's audits and hack signatures beside ``queue``
        (``tribunal.gateway.audit.build_audit_store``), built once: in Redis, the one every
        API replica and gateway worker writes to; in this process with the embedded queue."""
        if self._store is None:
            self._store = build_audit_store(queue)
        return self._store

    async def audit_report(self, queue: JobQueue) -> list[dict[str, Any]]:
        """Per audited spec, its windows and the items driving its gap
        (``tribunal.gateway.audit.report``) in the store beside ``queue``, for the inspector's
        monitor view: what every process on that queue audited, this one's jobs or its
        synchronous routes alike.

        Raises:
            RedisError: The store cannot be read.
        """
        return await report(self, self.audit_store(queue))

    async def signature_report(self, queue: JobQueue) -> list[dict[str, Any]]:
        """Per spec, its hack signatures and model cost per window of steps (or of time) in
        the store beside ``queue`` (what every process on it counted), and its whole spend
        (read from ``queue``'s stats) beside its budget
        (``tribunal.gateway.audit.signature_report``), for ``GET /v1/signatures`` and the
        inspector's monitor view.

        Raises:
            QueueUnavailable: ``queue``'s store cannot be read.
        """
        stats = await queue.stats("gateway")
        spent = {name: stats.get(spend_key(name), 0) / NANO for name in self.specs}
        return await signature_report(self, self.audit_store(queue), spent)

    def cache_payload(self, item: ScoreItem) -> dict[str, Any] | None:
        """Never cached here: the verifiers cache their own results, and a spec result
        depends on their versions, which the gateway learns only by asking."""
        return None

    async def unready_reasons(self) -> list[str]:
        """Why items routed to some verifier cannot be scored now: that verifier is
        unreachable, not ready, or degraded (its own reasons, under its name)."""
        return await self._probe() if self._probe is not None else []

    async def start(self) -> None:
        """Build the client to the verifiers."""
        if self.client is None:
            self.client = self._client_factory()

    async def aclose(self) -> None:
        """Cancel the audits in flight and close the client."""
        if self.auditor is not None:
            await self.auditor.aclose()
        if self.client is not None:
            await self.client.aclose()
            self.client = None

    def at_step(
        self,
        item: ScoreItem,
        step: int | None,
        policy_version: str | None = None,
        audit: BaseModel | None = None,
    ) -> ScoreItem:
        """``item`` at the trainer's ``step``, written by ``policy_version``, audited by
        ``audit`` (``TakesStep``: a job's), unless it carries its own ``trainer_step`` /
        ``policy_version`` / ``audit``; ``audit`` (an :class:`ItemAudit`) goes to ``verifier``
        items only (a spec item is audited as its spec says)."""
        if not isinstance(item, GatewayItem):
            return item
        update: dict[str, Any] = {}
        if step is not None and item.trainer_step is None:
            update["trainer_step"] = step
        if policy_version is not None and item.policy_version is None:
            update["policy_version"] = policy_version
        if isinstance(audit, ItemAudit) and item.verifier is not None and item.audit is None:
            update["audit"] = audit
        return item.model_copy(update=update) if update else item

    async def score(self, items: Sequence[ScoreItem]) -> list[ItemOutcome]:
        """Score a batch; one outcome per item, in request order. Where a queue is attached
        (:meth:`attach_queue`: the gateway's worker, scoring jobs), an item whose spec has
        spent its budget is answered ``budget_spent`` unscored (``tribunal.gateway.budget``),
        and the rest is then audited and its hack signatures counted, each item windowed by
        its ``trainer_step`` (the job's ``step``), or by time without one."""
        refused: list[ItemOutcome | None] = (
            [None] * len(items)
            if self._queue is None
            else await self._spent_items(self._queue, items)
        )
        kept = [item for item, error in zip(items, refused, strict=True) if error is None]
        answered = await self.score_outcomes(kept)
        if self._audits_jobs and self.auditor is not None:
            self.auditor.after(kept, answered, step=None)
        scored = iter(answered)
        return [next(scored) if error is None else error for error in refused]

    async def _spent_items(
        self, queue: JobQueue, items: Sequence[ScoreItem]
    ) -> list[ItemOutcome | None]:
        """Per item: the ``budget_spent`` outcome when its spec has spent its budget
        (``tribunal.gateway.budget``), else None (scored)."""
        names = [getattr(item, "spec", None) for item in items]
        spent = await spent_specs(queue, self.specs, (n for n in names if n is not None))
        out: list[ItemOutcome | None] = []
        for name in names:
            budget = None if name not in spent else self.specs[name].spec.budget_usd
            if name is None or budget is None:
                out.append(None)
                continue
            out.append(ItemOutcome.failed(budget_error(name, spent[name], budget, "spec")))
        return out

    async def score_outcomes(self, items: Sequence[ScoreItem]) -> list[ItemOutcome]:
        """Score a batch, one outcome per item, never audited (what an auditor scores with:
        an audit of an audit would never end where two specs audit each other)."""
        return [
            outcome if isinstance(outcome, ItemOutcome) else _passthrough(_typed(via, outcome))
            for outcome, via in await self._score(items)
        ]

    def attach_queue(self, queue: JobQueue, timeout_s: float) -> None:
        """Audit the jobs this process scores (the worker calls it once started), with the
        audit store beside ``queue`` and its counters in the queue's stats, and refuse the
        items of specs whose budget those stats say is spent."""
        self._audits_jobs = True
        self._queue = queue
        if self.auditor is None:
            self.auditor = Auditor(
                self, self.audit_store(queue), timeout_s=timeout_s, stats_sink=queue.incr_stats
            )

    async def score_results(self, items: Sequence[ScoreItem], info: VerifierInfo) -> list[str]:
        """Score a batch; one ``ItemResult`` JSON text per item, in request order (what the
        synchronous routes answer).

        A verifier item's result with a reward is passed on as its verifier wrote it, neither
        validated into models nor written again: that was half of the gateway's CPU per
        math item. Anything else (an error to rebase, a spec's result) is built as in
        :meth:`score` and written with ``info`` for results that name no verifier.
        """
        texts: list[str] = []
        for item, (outcome, via) in zip(items, await self._score(items), strict=True):
            if (
                isinstance(outcome, dict)
                and outcome.get("error") is None
                and isinstance(outcome.get("reward"), float)
                and outcome.get("id") == item.id
            ):
                with contextlib.suppress(orjson.JSONEncodeError):  # an integer past 64 bits
                    texts.append(orjson.dumps(outcome).decode())
                    continue
            if not isinstance(outcome, ItemOutcome):
                outcome = _passthrough(_typed(via, outcome))
            texts.append(result_json(item.id, outcome, info))
        return texts

    async def _score(self, items: Sequence[ScoreItem]) -> list[tuple[ItemOutcome | Answer, str]]:
        """One outcome per item, in request order, each with the verifier it went to (a
        verifier item's is its verifier's answer as it came, a spec item's its outcome)."""
        if self.client is None:
            await self.start()
        assert self.client is not None
        outcomes: list[tuple[ItemOutcome | Answer, str] | None] = [None] * len(items)
        spec_items: dict[int, _SpecItem] = {}
        first = _Calls()
        for index, item in enumerate(items):
            assert isinstance(item, GatewayItem)
            if item.verifier is not None:
                sink = self._direct_sink(outcomes, index, item.verifier)
                first.add(item.verifier, item.fields(), sink)
                continue
            assert item.spec is not None
            state = _SpecItem(item, self.specs[item.spec], item.fields())
            spec_items[index] = state
            # Gates first; a spec without gates is scored in one phase.
            has_gates = any(c.gate for c in state.loaded.spec.components.values())
            for name, component in state.loaded.spec.components.items():
                if component.gate is not None or not has_gates:
                    self._schedule(state, name, first)
        await first.run(self.client)
        second = _Calls()
        for state in spec_items.values():
            gates = [n for n, c in state.loaded.spec.components.items() if c.gate]
            if not gates or gate_closed(state.loaded, state.results):
                continue
            if any(state.results[n].error for n in gates):
                continue
            for name, component in state.loaded.spec.components.items():
                if component.gate is None:
                    self._schedule(state, name, second)
        await second.run(self.client)
        for index, state in spec_items.items():
            outcome = combine(state.loaded, state.results)
            self._count(state, outcome)
            outcomes[index] = (outcome, f"spec:{state.loaded.name}")
        assert all(o is not None for o in outcomes)
        return [o for o in outcomes if o is not None]

    def _count(self, state: _SpecItem, outcome: ItemOutcome) -> None:
        """Tally one spec item's outcome (spec and component names are the loaded specs',
        a bounded set; item ids never become labels)."""
        spec = f"spec{SEP}{state.loaded.name}{SEP}"
        if outcome.error is not None or outcome.reward is None:
            self.tally.add(f"{spec}error")
            code = outcome.error.code if outcome.error else "internal_error"
            self.tally.add(f"{spec}error{SEP}{code}")
            return
        # A formula may pay any finite amount: clipped here, a reward's square still fits
        # the 64-bit counter (in millionths) millions of times over. Its bucket is the same.
        reward = _clip(outcome.reward)
        self.tally.add(f"{spec}reward")
        self.tally.observe(f"{spec}rewards", reward, REWARD_BUCKETS)
        self.tally.add(f"{spec}squares", round(reward * reward * MICRO))
        for name, result in state.results.items():
            if result.reward is not None and result.error is None:
                summed = round(_clip(result.reward) * MICRO)
                self.tally.add(f"{spec}component{SEP}{name}{SEP}sum", summed)
                self.tally.add(f"{spec}component{SEP}{name}{SEP}count")

    @staticmethod
    def _direct_sink(
        outcomes: list[tuple[ItemOutcome | Answer, str] | None], index: int, verifier: str
    ) -> Callable[[Answer], None]:
        def sink(answer: Answer) -> None:
            outcomes[index] = (answer, verifier)

        return sink

    def _schedule(self, state: _SpecItem, name: str, calls: _Calls) -> None:
        """Compute a local component now, or queue a verifier component on ``calls``."""
        component = state.loaded.spec.components[name]
        source = resolve_source(component, state.rollout)
        if source is None:
            if component.default is not None:
                state.results[name] = ComponentResult(reward=component.default, status="default")
                return
            fields = ", ".join(s.when for s in component.one_of if s.when)
            error = BadInput(f"{name}: the rollout has none of the fields {fields}", field=name)
            state.results[name] = _error_result(error)
            return
        try:
            if source.builtin is not None:
                reward, details = BUILTINS[source.builtin](state.rollout, source.params)
                state.results[name] = ComponentResult(reward, details=details, source=source.kind)
                return
            item = self._component_item(state, name, source)
        except TribunalError as exc:
            state.results[name] = _error_result(exc, source.kind)
            return
        assert source.verifier is not None
        sink = self._component_sink(state, name, source.kind, source.verifier)
        calls.add(source.verifier, item, sink)

    @staticmethod
    def _component_item(state: _SpecItem, name: str, source: Source) -> dict[str, Any]:
        """The downstream item of one component. Its schema is checked by its verifier
        (whose per-item ``bad_input`` names the field), not here as well."""
        return {
            "id": component_item_id(state.item.id, name),
            **({"group_id": state.item.group_id} if state.item.group_id else {}),
            **build_inputs(source, state.rollout),
        }

    @staticmethod
    def _component_sink(
        state: _SpecItem, name: str, kind: str, verifier: str
    ) -> Callable[[Answer], None]:
        def sink(answer: Answer) -> None:
            result = _typed(verifier, answer)
            if isinstance(result, ItemError):
                state.results[name] = ComponentResult(
                    None, error=result, source=kind, status="error"
                )
                return
            if result.reward is None and result.error is None:
                error = InternalError(f"{kind} answered neither a reward nor an error")
                state.results[name] = _error_result(error, kind)
                return
            state.results[name] = ComponentResult(
                reward=result.reward,
                error=_rebase_error(result.error),
                details=result.details,
                source=kind,
                verifier=result.verifier,
                status="error" if result.error else "scored",
            )

        return sink


_MAX_SUMMED_REWARD = 1000.0
"""Rewards are clipped to ±this in the metrics' sums (never in an answer)."""


def _clip(reward: float) -> float:
    return max(-_MAX_SUMMED_REWARD, min(_MAX_SUMMED_REWARD, reward))


def _error_result(exc: TribunalError, source: str | None = None) -> ComponentResult:
    return ComponentResult(
        reward=None, error=ItemError.from_exception(exc), source=source, status="error"
    )
