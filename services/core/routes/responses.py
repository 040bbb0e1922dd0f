"""The error responses routes declare for OpenAPI."""

from __future__ import annotations

from typing import Any

from tribunal.core.envelope import ErrorResponse

ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": description}
    for status, description in {
        401: "Missing or wrong bearer token (unauthorized).",
        404: "No such job (job_not_found).",
        409: "Idempotency key reused for another batch (idempotency_conflict).",
        413: "Too many items or bytes in one request (payload_too_large).",
        422: "Malformed request; `field` names the input at fault (bad_input).",
        429: "Queue full; retry after Retry-After seconds (queue_full).",
        503: "Queue or backend unavailable; retry after Retry-After (queue_unavailable).",
        504: "Not scored within the synchronous deadline (timeout).",
    }.items()
}
