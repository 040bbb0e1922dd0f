"""``BackendMeter``: what a verifier's LLM backend calls cost, for ``/metrics``.

A verifier that calls a backend (the judge, the citation scorer's judge mode) sends each call
through its meter, which counts it by outcome (``ok`` or the error class), observes its
latency and knows how many are in flight. The verifier hands the counts to its worker
(``take_stats``) and the load to its heartbeat (``backend_load``): the worker process holds
the backend, and Prometheus scrapes only the API processes (``tribunal.core.metrics``).
"""

from __future__ import annotations

import asyncio
import time

from tribunal.core.metrics import LATENCY_BUCKETS_S, SEP, Tally
from tribunal.llm.base import Completion, CompletionRequest, LLMBackend
from tribunal.wire.errors import InternalError, TribunalError


class BackendMeter:
    """Counts, times and tracks the calls made through it.

    Args:
        bound: The backend's concurrency bound (``max_concurrency``), reported beside the
            calls in flight.
    """

    def __init__(self, bound: int) -> None:
        self.bound = bound
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

    def load(self, backend: LLMBackend | None = None) -> tuple[int, int]:
        """``(calls in flight, bound)``: the backend's own count of calls holding one of its
        slots where it keeps one (the openai backend), else the meter's."""
        in_flight = getattr(backend, "in_flight", None)
        return (self.in_flight if in_flight is None else int(in_flight)), self.bound
