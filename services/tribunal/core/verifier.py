"""The ``Verifier`` protocol: what the core needs from a verifier library.

A verifier is a plain library (parse, check, score) plus an object satisfying this protocol.
The core's HTTP app, queue and worker runtime are adapters around it; a verifier never
imports FastAPI, Redis or the queue.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel

from tribunal.wire.envelope import ItemOutcome, ScoreItem, VerifierInfo
from tribunal.wire.errors import InternalError, TribunalError

if TYPE_CHECKING:
    from tribunal.core.queue.base import JobQueue

logger = logging.getLogger(__name__)

ItemT = TypeVar("ItemT", bound=ScoreItem)


@runtime_checkable
class Verifier(Protocol):
    """A named, versioned batch scorer.

    Attributes:
        name: Queue and job name, also the URL segment of ``POST /v1/<name>/score``.
        version: Bumped whenever the same input could get a different result; part of every
            result and of the cache key.
        item_model: The pydantic model of one item (a ``ScoreItem`` subclass).

    A verifier may also have optional capabilities, each a ``runtime_checkable`` protocol
    below that the core tests with ``isinstance``: ``ScoresEachItem``, ``DocumentsDetails``,
    ``ReportsPool``, ``ReportsBackend``, ``TakesStats``, ``ProbesReadiness``,
    ``ServesCompanion``, ``DescribesLayers``, ``DescribesSpecs``, ``AttachesQueue``,
    ``TakesStep`` and ``ReportsAudits``.
    """

    name: str
    version: str
    item_model: type[ScoreItem]

    def config_hash(self) -> str:
        """Return a short stable hash of everything in the configuration that moves a score."""
        ...

    def cache_payload(self, item: ScoreItem) -> dict[str, Any] | None:
        """Return the inputs that determine ``item``'s result, or None to never cache it."""
        ...

    async def start(self) -> None:
        """Acquire resources (process pools, clients). Raise ``ConfigurationError`` to refuse
        to start (for example a sandbox that cannot isolate)."""
        ...

    async def aclose(self) -> None:
        """Release what ``start`` acquired."""
        ...

    async def score(self, items: Sequence[ScoreItem]) -> list[ItemOutcome]:
        """Score a batch; return one outcome per item, in order.

        A ``TribunalError`` that concerns one item must become that item's
        ``ItemOutcome.failed(...)``; raising fails every item of the batch. ``score_each``
        does both the gathering and that conversion.
        """
        ...


@runtime_checkable
class ScoresEachItem(Protocol):
    """A verifier whose items are scored independently of each other.

    It defines ``async score_item(item) -> ItemOutcome`` (raising ``TribunalError`` for that
    item's error, as ``score_each``'s ``score_one`` does) and makes ``score`` gather it. The
    worker then calls it once per distinct item and writes each result as soon as it is
    ready, so one slow item holds back no other; a verifier that gains from seeing the batch
    together (one that forwards it as a whole) leaves it out and gets ``score``.
    """

    async def score_item(self, item: Any) -> ItemOutcome:
        """Score one item (of the verifier's ``item_model``); may raise ``TribunalError``."""
        ...


@runtime_checkable
class DocumentsDetails(Protocol):
    """A verifier that names the type of its results' ``details``.

    ``details_model`` is a model, or a union of models, such as ``MathDetails``; the OpenAPI
    document then describes them (``<Name>ItemResult``), else as a free object. It is read
    for the document only: results are never validated through it.
    """

    details_model: Any


@runtime_checkable
class ReportsPool(Protocol):
    """A verifier with a pool of its own (processes, sandbox slots).

    Workers report its ``utilisation()`` with each heartbeat and ``/metrics`` sums it
    (``tribunal_pool_busy`` / ``_capacity``).
    """

    def utilisation(self) -> tuple[int, int]:
        """Return ``(busy, capacity)`` of the pool now."""
        ...


@runtime_checkable
class ReportsBackend(Protocol):
    """A verifier that calls an LLM backend.

    Workers report its ``backend_load()`` with each heartbeat
    (``tribunal_backend_in_flight`` / ``_concurrency``).
    """

    def backend_load(self) -> tuple[int, int]:
        """Return ``(calls in flight, concurrency bound)`` of the backend now."""
        ...


@runtime_checkable
class TakesStats(Protocol):
    """A verifier that counts what happens inside it (backend calls and their latency, a
    reward spec's rewards); the worker adds the counters to the cluster-wide stats with its
    next write."""

    def take_stats(self) -> dict[str, int]:
        """Return the counters of a ``tribunal.core.metrics.Tally`` since the last call."""
        ...


@runtime_checkable
class ProbesReadiness(Protocol):
    """A verifier that scores through something outside its service (an LLM backend, other
    services). The API's ``/readyz`` asks it on every probe and answers ``degraded`` with
    the reasons."""

    async def unready_reasons(self) -> list[str]:
        """Why it cannot score now, each a sentence naming the setting or the server at
        fault; [] when it can. Must answer within a few seconds whatever it probes."""
        ...


@runtime_checkable
class ServesCompanion(Protocol):
    """A verifier that serves a queue of its own beside its verifier's (the code sessions'
    per-worker stream). The worker runs ``companion`` beside its claim loop and awaits it
    once it stops claiming."""

    async def companion(self, queue: JobQueue, heartbeat_s: float, stop: asyncio.Event) -> None:
        """Serve until soon after ``stop`` is set; ``heartbeat_s`` is the worker's period (s)."""
        ...


@runtime_checkable
class DescribesLayers(Protocol):
    """A verifier that isolates programs: ``layers`` names the isolation layers its
    configuration asks for, shown by ``/readyz`` (``layers.<verifier>``)."""

    @property
    def layers(self) -> dict[str, Any]:
        """The isolation layers, by name."""
        ...


@runtime_checkable
class DescribesSpecs(Protocol):
    """A verifier scored by named reward specs: the reward inspector shows a kept item's
    rule beside it."""

    def spec_rule(self, name: str) -> dict[str, Any] | None:
        """The rule of the spec ``name``, or None if there is no such spec."""
        ...


@runtime_checkable
class AttachesQueue(Protocol):
    """A verifier that audits the jobs it scores (the gateway), or whose backend's rate limits
    are shared through the queue's Redis (the judge): the worker process (and the embedded
    workers) hand it their queue once it has started."""

    def attach_queue(self, queue: JobQueue, timeout_s: float) -> None:
        """Keep ``queue`` for its audits or limits; ``timeout_s`` bounds a wait on a job (s)."""
        ...


@runtime_checkable
class TakesStep(Protocol):
    """A verifier whose batches may carry the trainer's step (the gateway: its audits and
    hack signatures are windowed by it) and an auditor. Its job body (``POST /v1/jobs``)
    then takes an optional ``step``, ``policy_version`` and ``audit`` (an ``audit_model``),
    which :meth:`at_step` gives to each valid item before the batch is queued: the worker
    that scores an item may hold items of several jobs at once."""

    audit_model: type[BaseModel]
    """A batch's auditor (its job body's ``audit``), validated against what it serves."""

    def at_step(
        self,
        item: ScoreItem,
        step: int | None,
        policy_version: str | None = None,
        audit: BaseModel | None = None,
    ) -> ScoreItem:
        """``item`` at the trainer's ``step``, written by ``policy_version``, audited by
        ``audit`` (each None: unchanged); an item that carries its own keeps it."""
        ...


@runtime_checkable
class ReportsAudits(Protocol):
    """A verifier that audits what it scores: the inspector's monitor view shows its
    ``audit_report`` (per audited spec: training vs audit reward per window, the gap's
    interval, the items driving it) and its ``signature_report`` (per spec: the hack
    signatures and the model cost per window, the spend beside the budget)."""

    async def audit_report(self, queue: JobQueue) -> list[dict[str, Any]]:
        """One report per audited spec, read from the store beside ``queue``: what every
        process on it audited."""
        ...

    async def signature_report(self, queue: JobQueue) -> list[dict[str, Any]]:
        """One report per spec with signature windows (``GET /v1/signatures``' ``specs``),
        read from the store beside ``queue``; its cluster-wide stats hold each spec's whole
        spend."""
        ...


async def score_each(
    items: Sequence[ScoreItem],
    item_model: type[ItemT],
    score_one: Callable[[ItemT], Awaitable[ItemOutcome]],
) -> list[ItemOutcome]:
    """Score every item concurrently with ``score_one``; one outcome per item, in order.

    What every verifier's ``score`` would otherwise repeat: the gathering, and the rule that
    an item's error never fails the batch. A ``TribunalError`` raised for one item (in this
    process or, pickled, in a pool process) becomes that item's ``ItemOutcome.failed``; any
    other exception is a bug, logged with its traceback and reported as ``internal_error``.

    Args:
        items: The batch (the core validated each against the verifier's ``item_model``).
        item_model: The verifier's item class; an item of another class is a bug.
        score_one: Scores one item; may raise ``TribunalError``.

    Returns:
        One ``ItemOutcome`` per item, in the order of ``items``.
    """
    scored = (score_guarded(item, item_model, score_one) for item in items)
    return list(await asyncio.gather(*scored))


async def score_guarded(
    item: ScoreItem,
    item_model: type[ItemT],
    score_one: Callable[[ItemT], Awaitable[ItemOutcome]],
) -> ItemOutcome:
    """``score_one(item)``, with an error as the item's outcome: a ``TribunalError`` becomes
    ``ItemOutcome.failed``, any other exception (a bug) is logged with its traceback and
    becomes ``internal_error``. ``CancelledError`` propagates.
    """
    try:
        if not isinstance(item, item_model):
            raise InternalError(f"expected {item_model.__name__}, got {type(item).__name__}")
        return await score_one(item)
    except TribunalError as exc:
        return ItemOutcome.failed(exc)
    except Exception as exc:
        logger.exception("bug while scoring item %s", item.id)
        return ItemOutcome.failed(InternalError(f"{type(exc).__name__}: {exc}"))


def verifier_info(verifier: Verifier) -> VerifierInfo:
    """Return the name, version and config hash stamped on every result of ``verifier``."""
    return VerifierInfo(
        name=verifier.name, version=verifier.version, config_hash=verifier.config_hash()
    )
