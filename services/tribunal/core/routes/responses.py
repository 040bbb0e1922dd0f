"""The error responses routes declare for OpenAPI."""

from __future__ import annotations

from typing import Any

from tribunal.wire.envelope import ErrorResponse

ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": description}
    for status, description in {
        401: "Missing or wrong bearer token (unauthorized).",
        404: "No such job (job_not_found).",
        409: "Idempotency key reused for another batch (idempotency_conflict).",
        413: "Too many items or bytes in one request (payload_too_large).",
        422: "Malformed request (bad_input): `field` names the input at fault: `body` for "
        "JSON that does not parse (with line and column), `content-type` for a body that is "
        "not JSON, else the dotted path of the field.",
        429: "Queue full; retry after Retry-After seconds (queue_full).",
        500: "A bug in Tribunal (internal_error); see the service's logs.",
        503: "Queue or backend unavailable; retry after Retry-After (queue_unavailable).",
        504: "Not scored within the synchronous deadline (timeout).",
    }.items()
}
