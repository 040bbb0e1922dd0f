"""The gateway's connection to the verifiers: their HTTP APIs, one base URL each.

Why HTTP and not their queues directly: each verifier's API validates, answers from its
result cache and enqueues, exactly as for any other client; the gateway then needs no
knowledge of the verifiers' payloads, versions or Redis keys, works with verifiers on other
hosts or behind their own load balancers, and a verifier can be upgraded without touching
it. The cost is one HTTP hop per verifier and batch, measured by bench/gateway_overhead.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

from tribunal.core.envelope import ItemResult, ScoreResponse
from tribunal.core.errors import ALL_ERRORS, BackendUnavailable, TribunalError

_BY_CODE = {cls.code: cls for cls in ALL_ERRORS}


class HttpVerifiers:
    """Scores batches on the verifiers' ``POST /v1/<verifier>/score``.

    Args:
        urls: Verifier name -> base URL.
        timeout_s: Deadline of one request.
        api_key: Bearer token sent to the verifiers, if they need one.
    """

    def __init__(self, urls: dict[str, str], timeout_s: float, api_key: str | None) -> None:
        self.urls = urls
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout_s, connect=10.0),
            headers=headers,
            limits=httpx.Limits(max_connections=256, max_keepalive_connections=64),
        )

    async def score(self, verifier: str, items: Sequence[dict[str, Any]]) -> list[ItemResult]:
        """Score ``items`` on ``verifier``; one result per item, in order.

        Raises:
            BackendUnavailable: The verifier cannot be reached or timed out (retryable).
            TribunalError: The verifier refused the request; its own error class.
        """
        url = f"{self.urls[verifier]}/v1/{verifier}/score"
        try:
            response = await self._http.post(url, json={"items": list(items)})
        except httpx.HTTPError as exc:
            raise BackendUnavailable(f"{url}: {type(exc).__name__}: {exc}") from None
        if response.status_code != 200:
            raise _error_from(url, response)
        return ScoreResponse.model_validate_json(response.content).results

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()


def _error_from(url: str, response: httpx.Response) -> TribunalError:
    try:
        body = response.json()["error"]
        cls = _BY_CODE.get(str(body["code"]), BackendUnavailable)
        return cls(f"{url}: {body['message']}", field=body.get("field"))
    except (ValueError, KeyError, TypeError):
        return BackendUnavailable(f"{url}: HTTP {response.status_code}")
