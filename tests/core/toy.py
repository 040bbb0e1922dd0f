"""A tiny real verifier for testing the core without any verifier's domain code."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import Field

from tribunal.core.service import ServiceSpec
from tribunal.core.settings import CoreSettings
from tribunal.core.verifier import Verifier
from tribunal.wire.envelope import ItemOutcome, ScoreItem
from tribunal.wire.errors import BadInput


class ToyItem(ScoreItem):
    """Reward = share of vowels in ``text``; ``text="bad"`` is an item-level bad input."""

    text: str = Field(max_length=100_000)


class ToyVerifier:
    """Counts every call and every item it scores, so tests can see dedupe and caching."""

    name = "toy"
    version = "1"
    item_model: type[ScoreItem] = ToyItem

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def config_hash(self) -> str:
        return "0" * 16

    def cache_payload(self, item: ScoreItem) -> dict[str, Any] | None:
        return item.model_dump(include={"text"})

    async def start(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

    async def score(self, items: Sequence[ScoreItem]) -> list[ItemOutcome]:
        texts = [item.text for item in items]
        self.calls.append(texts)
        outcomes = []
        for text in texts:
            if text == "bad":
                outcomes.append(
                    ItemOutcome.failed(BadInput("text: 'bad' is refused", field="text"))
                )
            else:
                vowels = sum(ch in "aeiou" for ch in text)
                outcomes.append(
                    ItemOutcome(reward=vowels / max(len(text), 1), details={"n": len(text)})
                )
        return outcomes


def toy_spec(verifier: ToyVerifier) -> ServiceSpec:
    """A service serving ``verifier``."""

    def create(settings: Any) -> list[Verifier]:
        return [verifier]

    return ServiceSpec(name="toy", port=0, settings_cls=CoreSettings, create_verifiers=create)
