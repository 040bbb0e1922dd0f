"""The gateway's connection to the verifiers: their HTTP APIs through ``tribunal.client``.

Why HTTP and not their queues directly: each verifier's API validates, answers from its
result cache and enqueues, exactly as for any other client; the gateway then needs no
knowledge of the verifiers' payloads, versions or Redis keys, works with verifiers on other
hosts or behind their own load balancers, and a verifier can be upgraded without touching
it. The cost is one HTTP hop per verifier and batch, measured by bench/gateway_overhead.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import orjson

from tribunal.client import APIError, ClientError, TribunalClient
from tribunal.core.errors import ALL_ERRORS, BackendUnavailable

_BY_CODE = {cls.code: cls for cls in ALL_ERRORS}


class ClientVerifiers:
    """Scores batches on the verifiers' ``POST /v1/<verifier>/score``, one
    :class:`~tribunal.client.TribunalClient` per verifier.

    Args:
        urls: Verifier name -> base URL.
        timeout_s: Deadline of one request.
        api_key: Bearer token sent to the verifiers, if they need one.
        max_retries: Retries of a request that failed for a retryable reason (the client
            backs off, honouring ``Retry-After``).
        max_concurrency: Requests in flight per verifier.
    """

    def __init__(
        self,
        urls: dict[str, str],
        timeout_s: float,
        api_key: str | None,
        max_retries: int = 2,
        max_concurrency: int = 64,
    ) -> None:
        self.clients = {
            name: TribunalClient(
                url,
                api_key=api_key,
                timeout=timeout_s,
                max_retries=max_retries,
                max_concurrency=max_concurrency,
            )
            for name, url in urls.items()
        }

    async def score(self, verifier: str, items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Score ``items`` on ``verifier``; one result per item, in order, as the verifier
        wrote it (decoded ``ItemResult`` JSON).

        Raises:
            TribunalError: The request failed as a whole: the verifier's own error class
                when it answered one, ``BackendUnavailable`` (retryable) when it could not
                be reached.
        """
        client = self.clients[verifier]
        try:
            # Items encoded with orjson (json.dumps was a fifth of the gateway's CPU per item).
            return await client.score_json(verifier, [_item_json(item) for item in items])
        except APIError as exc:
            cls = _BY_CODE.get(exc.code, BackendUnavailable)
            raise cls(
                f"{client.base_url}: {exc.message}",
                field=exc.field,
                retry_after_s=exc.retry_after_s,
            ) from None
        except ClientError as exc:
            raise BackendUnavailable(f"{client.base_url}: {exc}") from None

    async def aclose(self) -> None:
        """Close every client's connection pool."""
        await asyncio.gather(*(client.aclose() for client in self.clients.values()))


def _item_json(item: dict[str, Any]) -> bytes:
    """An item as JSON: orjson, or json for what orjson refuses (an integer past 64 bits)."""
    try:
        data: bytes = orjson.dumps(item)
    except orjson.JSONEncodeError:
        return json.dumps(item, ensure_ascii=False).encode()
    return data
