"""``BackendMeter``: what a verifier's LLM backend calls cost, for ``/metrics``.

A verifier that calls a backend (the judge, the citation scorer's judge mode) sends each call
through its meter, which counts it by outcome (``ok`` or the error class), observes its
latency, counts the tokens the server reports (and their cost, for a priced model) and knows
how many are in flight; the judge hands it each item's tokens for the cost per item. The
verifier hands the counts to its worker (``take_stats``) and the load to its heartbeat
(``backend_load``): the worker process holds the backend, and Prometheus scrapes only the
API processes (``tribunal.core.metrics``).
"""

from __future__ import annotations

import asyncio
import time

from tribunal.core.metrics import COST_BUCKETS_USD, LATENCY_BUCKETS_S, SEP, Tally
from tribunal.llm.base import Completion, CompletionRequest, LLMBackend
from tribunal.llm.config import BackendConfig
from tribunal.wire.errors import InternalError, TribunalError

NANO = 1_000_000_000
"""Costs are tallied in billionths of a dollar (integer counters that add across processes)."""


class BackendMeter:
    """Counts, times and tracks the calls made through it.

    Args:
        bound: The backend's concurrency bound (``max_concurrency``), reported beside the
            calls in flight.
        config: The backend's settings, for its prices (None, or unpriced: tokens are
            counted, no cost).
    """

    def __init__(self, bound: int, config: BackendConfig | None = None) -> None:
        self.bound = bound
        self.config = config
        self.in_flight = 0
        """Calls made through the meter and not answered yet (waiting for one of the
        backend's slots included)."""
        self.tally = Tally()

    async def complete(self, backend: LLMBackend, request: CompletionRequest) -> Completion:
        """``backend.complete(request)``, counted.

        Raises:
            TribunalError: The backend's error, unchanged.
        """
        self.in_flight += 1
        started = time.perf_counter()
        # A bug (any other exception) is an internal error; a call cancelled with its batch
        # (a worker stopping) says nothing of the backend and is not counted.
        outcome: str | None = InternalError.code
        try:
            completion = await backend.complete(request)
            outcome = "ok"
            self._count_tokens(completion.prompt_tokens, completion.completion_tokens)
            return completion
        except TribunalError as exc:
            outcome = exc.code
            raise
        except asyncio.CancelledError:
            outcome = None
            raise
        finally:
            self.in_flight -= 1
            if outcome is not None:
                self.tally.add(f"backend{SEP}{outcome}")
                elapsed = time.perf_counter() - started
                self.tally.observe("backend_latency", elapsed, LATENCY_BUCKETS_S)

    def _count_tokens(self, prompt_tokens: int, completion_tokens: int) -> None:
        """Tally a call's reported tokens (``backend_tokens|prompt`` / ``|completion``) and,
        priced, their cost (``backend_cost_nanousd``)."""
        self.tally.add(f"backend_tokens{SEP}prompt", prompt_tokens)
        self.tally.add(f"backend_tokens{SEP}completion", completion_tokens)
        cost = self.config.cost_usd(prompt_tokens, completion_tokens) if self.config else None
        if cost is not None:
            self.tally.add("backend_cost_nanousd", round(cost * NANO))

    def charge_item(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """Observe one item's cost (USD, its calls' reported tokens at the model's prices) in
        ``item_cost`` and return it; None (nothing observed) for an unpriced model."""
        cost = self.config.cost_usd(prompt_tokens, completion_tokens) if self.config else None
        if cost is not None:
            self.tally.observe("item_cost", cost, COST_BUCKETS_USD)
        return cost

    def load(self, backend: LLMBackend | None = None) -> tuple[int, int]:
        """``(calls in flight, bound)``: the backend's own count of calls holding one of its
        slots where it keeps one (the openai backend), else the meter's."""
        in_flight = getattr(backend, "in_flight", None)
        return (self.in_flight if in_flight is None else int(in_flight)), self.bound
