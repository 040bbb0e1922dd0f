"""The adapters' one call: score a batch of items on the gateway, through ``tribunal.client``."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from tribunal.client import ItemResult, TribunalClient
from tribunal.core.registry import local_url


def gateway_access(url: str | None, api_key: str | None) -> tuple[str, str | None]:
    """The gateway's URL and bearer token: those given, else ``TRIBUNAL_GATEWAY_URL`` (default
    the gateway of ``make up``, ``http://127.0.0.1:8100``) and ``TRIBUNAL_API_KEY``.

    The adapters run inside another project's trainer, configured by that project's config
    files: these two variables are the only way to point them elsewhere without code.
    """
    return (
        url or os.environ.get("TRIBUNAL_GATEWAY_URL") or local_url("gateway"),
        api_key or os.environ.get("TRIBUNAL_API_KEY") or None,
    )


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
