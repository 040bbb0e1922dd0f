"""Score with a verifier's scoring processes running: its CPU work never runs without them."""

from __future__ import annotations

from collections.abc import Sequence

from tribunal.citation.verifier import CitationVerifier
from tribunal.wire.citation import CitationItem
from tribunal.wire.envelope import ItemOutcome


async def score_started(
    verifier: CitationVerifier, items: Sequence[CitationItem]
) -> list[ItemOutcome]:
    """Start ``verifier``, score ``items``, stop it."""
    await verifier.start()
    try:
        return await verifier.score(items)
    finally:
        await verifier.aclose()
