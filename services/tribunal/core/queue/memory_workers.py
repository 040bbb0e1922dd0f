"""The embedded queue's worker registry: heartbeats, pool utilisation and refusals."""

from __future__ import annotations

import time

from tribunal.core.queue.memory_state import MemoryState


class MemoryWorkerRegistry(MemoryState):
    """``WorkerRegistry`` in this process: each verifier's workers' last heartbeat and
    load, and its refusal."""

    async def heartbeat(
        self,
        verifier: str,
        consumer: str,
        utilisation: tuple[int, int] | None = None,
        backend: tuple[int, int] | None = None,
    ) -> None:
        """Record the worker's heartbeat time (and its pool's and backend's load)."""
        stream = self._stream(verifier)
        stream.workers[consumer] = time.time()
        if utilisation is not None or backend is not None:
            stream.utilisation[consumer] = (*(utilisation or (0, 0)), *(backend or ()))

    async def retire(self, verifier: str, consumer: str) -> None:
        """Forget the worker's heartbeat."""
        self._stream(verifier).workers.pop(consumer, None)
        self._stream(verifier).utilisation.pop(consumer, None)

    async def utilisation(self, verifier: str, within_s: float) -> tuple[int, int]:
        """Sum the last reported utilisation of the live workers."""
        reported = self._loads(verifier, within_s)
        return sum(u[0] for u in reported), sum(u[1] for u in reported)

    async def backend_load(self, verifier: str, within_s: float) -> tuple[int, int]:
        """Sum the last reported backend load of the live workers."""
        reported = [u for u in self._loads(verifier, within_s) if len(u) == 4]
        return sum(u[2] for u in reported), sum(u[3] for u in reported)

    def _loads(self, verifier: str, within_s: float) -> list[tuple[int, ...]]:
        stream = self._stream(verifier)
        cutoff = time.time() - within_s
        live = [stream.utilisation.get(c) for c, t in stream.workers.items() if t >= cutoff]
        return [u for u in live if u is not None]

    async def live_workers(self, verifier: str, within_s: float) -> int:
        """Count heartbeats newer than ``within_s``."""
        cutoff = time.time() - within_s
        return sum(1 for t in self._stream(verifier).workers.values() if t >= cutoff)

    async def set_refusal(self, verifier: str, reason: str | None) -> None:
        """Record or clear the refusal."""
        self._stream(verifier).refusal = reason

    async def refusal(self, verifier: str) -> str | None:
        """Return the refusal."""
        return self._stream(verifier).refusal
