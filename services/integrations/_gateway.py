"""The adapters' one call: score a batch of items on the gateway, through ``tribunal.client``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tribunal.client import ItemResult, TribunalClient


async def score_on_gateway(
    url: str,
    items: Sequence[dict[str, Any]],
    api_key: str | None,
    timeout_s: float,
    max_retries: int = 6,
) -> list[ItemResult]:
    """``POST <url>/v1/gateway/score`` with ``items``; one result per item, in order.

    A client per call: TRL runs reward functions on an event loop of its own and verl calls
    from threads, so nothing bound to one loop is kept between calls.

    Raises:
        tribunal.client.ClientError: The gateway cannot be reached or refused the batch
            (after the client's retries).
    """
    async with TribunalClient(
        url, api_key=api_key, timeout=timeout_s, max_retries=max_retries
    ) as client:
        return await client.score("gateway", items)
