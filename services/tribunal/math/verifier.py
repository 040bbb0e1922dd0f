"""``MathVerifier``: the math library behind the core's ``Verifier`` protocol.

Each item is verified in a pool process under a hard deadline (``DeadlinePool``); an item
that overruns gets a ``timeout`` error and its process is replaced, while the other items of
the batch go on in the other processes. The items of a batch go to the pool in chunks
(``tribunal.core.chunking``), a few per task, with the deadline still per item. Items
whose answer and ground truth are plain numbers (GSM8K's) are decided in the worker itself
by ``verify_plain_numbers``: no sympy, tens of microseconds, where the process hop alone
would cost more than the comparison.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tribunal.core.chunking import ChunkedCalls
from tribunal.core.pool import DeadlinePool
from tribunal.core.verifier import score_each
from tribunal.math.config import MathConfig
from tribunal.math.verify import MathScore, verify_answer, verify_plain_numbers
from tribunal.wire.envelope import ItemOutcome, ScoreItem
from tribunal.wire.errors import InternalError
from tribunal.wire.hashing import config_hash
from tribunal.wire.math import MathDetails, MathItem

VERSION = "4"
"""Bump when the same input could get a different reward."""


INLINE_MAX_RESPONSE_CHARS = 32_768
"""Longest completion tried in the worker's own process (extraction is linear, and this
bounds how long one item can hold the event loop: well under a millisecond)."""


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
    details_model: Any = MathDetails

    def __init__(self, config: MathConfig, *, processes: int, timeout_s: float) -> None:
        self.config = config
        self.processes = processes
        self.timeout_s = timeout_s
        self._pool: DeadlinePool | None = None
        self._calls: ChunkedCalls[MathScore] | None = None

    def utilisation(self) -> tuple[int, int]:
        """``(busy, capacity)`` of the verification processes."""
        return (self._pool.busy if self._pool is not None else 0), self.processes

    def config_hash(self) -> str:
        """Hash of the comparison settings (the deadline and process count move no reward)."""
        return config_hash(self.config.as_dict())

    def cache_payload(self, item: ScoreItem) -> dict[str, Any] | None:
        """The response, ground truth and options decide the reward."""
        return item.model_dump(include={"response", "ground_truth", "options"})

    async def start(self) -> None:
        """Start the verification processes (imports sympy once, in the forkserver)."""
        self._pool = DeadlinePool(self.processes, preload=["tribunal.math.verify"])
        self._calls = ChunkedCalls(self._pool, verify_answer, timeout_s=self.timeout_s)

    async def aclose(self) -> None:
        """Stop the verification processes."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None
            self._calls = None

    async def score(self, items: Sequence[ScoreItem]) -> list[ItemOutcome]:
        """Verify every item concurrently, each under the deadline."""
        return await score_each(items, MathItem, self.score_item)

    async def score_item(self, item: MathItem) -> ItemOutcome:
        """Verify one item: in this process when its answer is a plain number, else in a
        verification process under the deadline.

        Raises:
            BadInput: The ground truth cannot be read.
            ScoringTimeout: The item overran its deadline.
        """
        if self._calls is None:
            raise InternalError("MathVerifier.score called before start()")
        config = self.config
        if item.options is not None:
            config = config.merged(
                float_rounding=item.options.float_rounding,
                strict=item.options.strict,
                last_box_only=item.options.last_box_only,
                answer_format=item.options.answer_format,
                chat_template=item.options.chat_template,
            )
        answer = None
        if len(item.response) <= INLINE_MAX_RESPONSE_CHARS:
            answer = verify_plain_numbers(item.response, item.ground_truth, config)
        if answer is None:
            # A BadInput raised in the pool process comes back pickled, as the same error.
            answer = await self._calls.run(item.response, item.ground_truth, config)
        details = answer.details().model_dump()
        return ItemOutcome(reward=answer.reward, details=details)
