"""``SyncTribunalClient``: the async client behind blocking calls, for scripts and notebooks.

It owns an event loop (``asyncio.Runner``) and runs each call of a
:class:`~tribunal.client.client.TribunalClient` on it. Do not use it from inside a running
event loop (use the async client there).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tribunal.client.client import Item, TribunalClient

if TYPE_CHECKING:
    from tribunal.wire.code import RunDetails, RunItem
    from tribunal.wire.envelope import ItemResult, JobState


class SyncTribunalClient:
    """Blocking facade of :class:`TribunalClient`; same arguments, same methods.

    Examples:
        >>> with SyncTribunalClient("http://127.0.0.1:8101") as client:  # doctest: +SKIP
        ...     results = client.score("math", [{"id": "a", "response": "#### 18",
        ...                                      "ground_truth": "18"}])
    """

    def __init__(self, base_url: str, **kwargs: Any) -> None:
        self._runner = asyncio.Runner()
        self._client = TribunalClient(base_url, **kwargs)

    def __enter__(self) -> SyncTribunalClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool and the event loop."""
        try:
            self._runner.run(self._client.aclose())
        finally:
            self._runner.close()

    def score(
        self,
        verifier: str,
        items: Sequence[Item],
        *,
        idempotency_key: str | None = None,
        step: int | None = None,
        policy_version: str | None = None,
        audit: Item | None = None,
    ) -> list[ItemResult]:
        """See :meth:`TribunalClient.score`."""
        return self._runner.run(
            self._client.score(
                verifier,
                items,
                idempotency_key=idempotency_key,
                step=step,
                policy_version=policy_version,
                audit=audit,
            )
        )

    def submit(
        self,
        verifier: str,
        items: Sequence[Item],
        *,
        idempotency_key: str | None = None,
        step: int | None = None,
        policy_version: str | None = None,
        audit: Item | None = None,
    ) -> str:
        """See :meth:`TribunalClient.submit`."""
        return self._runner.run(
            self._client.submit(
                verifier,
                items,
                idempotency_key=idempotency_key,
                step=step,
                policy_version=policy_version,
                audit=audit,
            )
        )

    def job(self, job_id: str, *, wait_s: float = 0.0) -> JobState:
        """See :meth:`TribunalClient.job`."""
        return self._runner.run(self._client.job(job_id, wait_s=wait_s))

    def wait(self, job_id: str, *, timeout_s: float | None = None) -> list[ItemResult]:
        """See :meth:`TribunalClient.wait`."""
        return self._runner.run(self._client.wait(job_id, timeout_s=timeout_s))

    def iter_results(self, job_id: str, **kwargs: Any) -> Iterator[tuple[int, ItemResult]]:
        """See :meth:`TribunalClient.iter_results`."""
        stream = self._client.iter_results(job_id, **kwargs)
        try:
            while True:
                try:
                    yield self._runner.run(_next(stream))
                except StopAsyncIteration:
                    return
        finally:
            self._runner.run(stream.aclose())  # type: ignore[attr-defined]

    def run_code(self, item: RunItem | Mapping[str, Any]) -> RunDetails:
        """See :meth:`TribunalClient.run_code`."""
        return self._runner.run(self._client.run_code(item))

    def ready(self) -> bool:
        """See :meth:`TribunalClient.ready`."""
        return self._runner.run(self._client.ready())


async def _next(stream: AsyncIterator[tuple[int, ItemResult]]) -> tuple[int, ItemResult]:
    return await anext(stream)
