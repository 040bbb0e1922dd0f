"""``MathVerifier``: the math library behind the core's ``Verifier`` protocol.

Each item is verified in a pool process under a hard deadline (``DeadlinePool``); an item
that overruns gets a ``timeout`` error and its process is replaced, while the other items of
the batch go on in the other processes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any, cast

from tribunal.core.envelope import ItemOutcome, ScoreItem
from tribunal.core.errors import BadInput, InternalError, TribunalError
from tribunal.core.hashing import config_hash
from tribunal.core.pool import DeadlinePool
from tribunal.math.config import MathConfig
from tribunal.math.schemas import MathDetails, MathItem
from tribunal.math.verify import MathScore, verify_answer

VERSION = "2"
"""Bump when the same input could get a different reward."""

_ERRORS: dict[str, type[TribunalError]] = {"bad_input": BadInput, "internal_error": InternalError}


def verify_in_process(
    response: str, ground_truth: str, config: MathConfig
) -> MathScore | tuple[str, str, str | None]:
    """Run ``verify_answer`` in a pool process; a ``TribunalError`` comes back as a tuple
    ``(code, message, field)`` because its keyword-only fields do not survive pickling."""
    try:
        return verify_answer(response, ground_truth, config)
    except TribunalError as exc:
        return (exc.code, exc.message, exc.field)


class MathVerifier:
    """Rewards 1.0 when a completion's final answer is equivalent to the ground truth.

    Args:
        config: Extraction and comparison settings.
        processes: Verification processes.
        timeout_s: Hard deadline per item (s).
    """

    name = "math"
    version = VERSION
    item_model: type[ScoreItem] = MathItem

    def __init__(self, config: MathConfig, *, processes: int, timeout_s: float) -> None:
        self.config = config
        self.processes = processes
        self.timeout_s = timeout_s
        self._pool: DeadlinePool | None = None

    def config_hash(self) -> str:
        """Hash of the comparison settings (the deadline and process count move no reward)."""
        return config_hash(asdict(self.config))

    def cache_payload(self, item: ScoreItem) -> dict[str, Any] | None:
        """The response, ground truth and options decide the reward."""
        return item.model_dump(include={"response", "ground_truth", "options"})

    async def start(self) -> None:
        """Start the verification processes (imports sympy once, in the forkserver)."""
        self._pool = DeadlinePool(self.processes, preload=["tribunal.math.verify"])

    async def aclose(self) -> None:
        """Stop the verification processes."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    async def score(self, items: Sequence[ScoreItem]) -> list[ItemOutcome]:
        """Verify every item concurrently, each under the deadline."""
        return list(await asyncio.gather(*(self._score_one(cast(MathItem, i)) for i in items)))

    async def _score_one(self, item: MathItem) -> ItemOutcome:
        if self._pool is None:
            raise InternalError("MathVerifier.score called before start()")
        config = self.config
        if item.options is not None:
            config = config.merged(
                float_rounding=item.options.float_rounding, strict=item.options.strict
            )
        try:
            answer = await self._pool.run(
                verify_in_process,
                item.response,
                item.ground_truth,
                config,
                timeout_s=self.timeout_s,
            )
        except TribunalError as exc:
            return ItemOutcome.failed(exc)
        if isinstance(answer, tuple):
            code, message, field = answer
            return ItemOutcome.failed(_ERRORS.get(code, InternalError)(message, field=field))
        details = MathDetails.from_score(answer).model_dump()
        return ItemOutcome(reward=answer.reward, details=details)
