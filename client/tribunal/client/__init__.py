"""``tribunal.client``: the one way into Tribunal's services from outside them.

An async client on httpx (:class:`TribunalClient`) with a blocking facade
(:class:`SyncTribunalClient`), typed results (the envelope's ``ItemResult``; the code
service's ``RunDetails`` for ``run_code``, its tool endpoint), a :func:`rewards` helper and
one small error tree (``tribunal.client.errors``). It needs
pydantic, httpx and orjson only: no server, queue or verifier dependency is imported.

Example::

    from tribunal.client import TribunalClient, rewards

    async with TribunalClient("http://127.0.0.1:8101", max_concurrency=8) as client:
        results = await client.score("math", [{"id": "a", "response": "#### 18",
                                               "ground_truth": "18"}])
        job_id = await client.submit("math", items, idempotency_key="step-12")
        async for index, result in client.iter_results(job_id):
            ...
"""

from typing import TYPE_CHECKING, Any

from tribunal.client.client import DEFAULT_TIMEOUT, Item, TribunalClient, item_json, rewards
from tribunal.client.errors import (
    APIError,
    ClientError,
    JobNotFoundError,
    JobTimeout,
    Overloaded,
    RequestRejected,
    ServerError,
    TransportError,
)
from tribunal.client.sync import SyncTribunalClient

if TYPE_CHECKING:
    from tribunal.wire.envelope import ItemError, ItemResult, JobState

__all__ = [
    "DEFAULT_TIMEOUT",
    "APIError",
    "ClientError",
    "Item",
    "ItemError",
    "ItemResult",
    "JobNotFoundError",
    "JobState",
    "JobTimeout",
    "Overloaded",
    "RequestRejected",
    "ServerError",
    "SyncTribunalClient",
    "TransportError",
    "TribunalClient",
    "item_json",
    "rewards",
]


def __getattr__(name: str) -> Any:
    """Import the envelope's models on first use (PEP 562): building them costs
    ``tribunal score`` some 20 ms of start-up, and it needs none of them."""
    if name in {"ItemError", "ItemResult", "JobState"}:
        from tribunal.wire import envelope

        return getattr(envelope, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
