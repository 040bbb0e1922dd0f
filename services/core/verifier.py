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

from tribunal.core.envelope import ItemOutcome, ScoreItem
from tribunal.core.errors import InternalError, TribunalError

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

    async def guarded(item: ScoreItem) -> ItemOutcome:
        try:
            if not isinstance(item, item_model):
                raise InternalError(f"expected {item_model.__name__}, got {type(item).__name__}")
            return await score_one(item)
        except TribunalError as exc:
            return ItemOutcome.failed(exc)
        except Exception as exc:
            logger.exception("bug while scoring item %s", item.id)
            return ItemOutcome.failed(InternalError(f"{type(exc).__name__}: {exc}"))

    return list(await asyncio.gather(*(guarded(item) for item in items)))
