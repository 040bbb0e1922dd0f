"""The adapters' one call: score a batch of items on the gateway."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

from tribunal.core.envelope import ItemResult, ScoreResponse


async def score_on_gateway(
    url: str, items: Sequence[dict[str, Any]], api_key: str | None, timeout_s: float
) -> list[ItemResult]:
    """``POST <url>/v1/score`` with ``items``; one result per item, in order.

    Raises:
        httpx.HTTPError: The gateway cannot be reached or answered an error.
    """
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    async with httpx.AsyncClient(timeout=timeout_s, headers=headers) as http:
        response = await http.post(f"{url.rstrip('/')}/v1/score", json={"items": list(items)})
        response.raise_for_status()
    return ScoreResponse.model_validate_json(response.content).results
