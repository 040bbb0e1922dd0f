"""Whether a backend can answer now: the reasons a service's ``/readyz`` reports it
``degraded`` (docs/operations.md, "Readiness").

A probe never starts a backend and never asks the model: a chat-completions server is asked
for ``GET <base_url>/models`` (what vLLM and OpenAI answer without running the model), with
a deadline of its own; a transformers backend is loaded by the process that scores with it,
so its configuration is all there is to check here.
"""

from __future__ import annotations

import httpx

from tribunal.llm.base import LLMBackend, NullBackend

PROBE_TIMEOUT_S = 1.0
"""Deadline of one probe of a backend server, seconds: within the gateway's probe of this
service's ``/readyz`` (1.5 s), so that the gateway hears this service's own reason."""


async def backend_unready_reasons(
    backend: LLMBackend, timeout_s: float = PROBE_TIMEOUT_S
) -> list[str]:
    """Why ``backend`` cannot answer a call now: [] when it can, as far as can be told
    without asking the model.

    Args:
        backend: A backend as ``create_backend`` builds it (started or not).
        timeout_s: Deadline of the probe request, seconds.

    Returns:
        Reasons, each a sentence naming the setting or the server at fault: the backend is
        not configured (a ``NullBackend``'s own message), or its server is unreachable or
        answers ``/models`` with an error status.
    """
    if isinstance(backend, NullBackend):
        return [backend.reason]
    config = getattr(backend, "config", None)
    base_url = getattr(config, "base_url", None) if backend.kind == "openai" else None
    if not base_url:
        return []
    url = base_url.rstrip("/") + "/models"
    api_key = getattr(config, "api_key", None)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        async with httpx.AsyncClient(timeout=timeout_s) as client:
            response = await client.get(url, headers=headers)
    except httpx.HTTPError as exc:
        return [f"backend {base_url} is unreachable ({type(exc).__name__}: {exc})"]
    if response.status_code != 200:
        return [f"backend {base_url} answers GET /models with HTTP {response.status_code}"]
    return []
