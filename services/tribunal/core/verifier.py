"""The ``Verifier`` protocol: what the core needs from a verifier library.

A verifier is a plain library (parse, check, score) plus an object satisfying this protocol.
The core's HTTP app, queue and worker runtime are adapters around it; a verifier never
imports FastAPI, Redis or the queue.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from tribunal.wire.envelope import ItemOutcome, ScoreItem, VerifierInfo
from tribunal.wire.errors import InternalError, TribunalError

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

    Optionally, a verifier whose items are scored independently of each other defines
    ``async score_item(item) -> ItemOutcome`` (raising ``TribunalError`` for that item's
    error, as ``score_each``'s ``score_one`` does) and makes ``score`` gather it. The worker
    then calls it once per distinct item and writes each result as soon as it is ready, so
    one slow item holds back no other; a verifier that gains from seeing the batch together
    (one that forwards it as a whole) leaves it out and gets ``score``.

    Optionally, a verifier names the type of its results' ``details`` in ``details_model``
    (a model, or a union of models, such as ``MathDetails``); its OpenAPI document then
    describes them (``<Name>ItemResult``), else as a free object. It is read for the
    document only: results are never validated through it.

    Optionally, a verifier with a pool of its own (processes, sandbox slots) defines
    ``utilisation() -> tuple[int, int]``, its ``(busy, capacity)`` now; workers report it
    with each heartbeat and ``/metrics`` sums it (``tribunal_pool_busy`` / ``_capacity``);
    one that calls an LLM backend defines ``backend_load() -> tuple[int, int]``, its calls in
    flight and concurrency bound (``tribunal_backend_in_flight`` / ``_concurrency``).

    Optionally, a verifier that counts what happens inside it (backend calls and their
    latency, a reward spec's rewards) defines ``take_stats() -> dict[str, int]``: the
    counters of a ``tribunal.core.metrics.Tally`` since the last call, which the worker adds
    to the cluster-wide stats with its next write.

    Optionally, a verifier that scores through something outside its service (an LLM
    backend, other services) defines ``async unready_reasons() -> list[str]``: why it cannot
    score now (each a sentence naming the setting or the server at fault), [] when it can.
    The API's ``/readyz`` asks it on every probe and answers ``degraded`` with the reasons.
    It must answer within a few seconds whatever it probes.

    Optionally, a verifier that serves a queue of its own beside its verifier's (the code
    sessions' per-worker stream) defines ``async companion(queue, heartbeat_s, stop)``: the
    worker runs it beside its claim loop and awaits it once it stops claiming; it returns
    soon after the ``asyncio.Event`` ``stop`` is set.
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
