"""The ``Verifier`` protocol: what the core needs from a verifier library.

A verifier is a plain library (parse, check, score) plus an object satisfying this protocol.
The core's HTTP app, queue and worker runtime are adapters around it; a verifier never
imports FastAPI, Redis or the queue.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from tribunal.core.envelope import ItemOutcome, ScoreItem


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
        ``ItemOutcome.failed(...)``; raising fails every item of the batch.
        """
        ...
