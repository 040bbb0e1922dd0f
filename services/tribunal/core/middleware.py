"""Pure ASGI middleware: the bearer token, a request-body byte limit and request ids, all
checked before a byte of the body is read."""

from __future__ import annotations

import base64
import binascii
import json
import secrets
import uuid
from typing import Any

from fastapi import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

GUARDED = ("/v1/", "/inspect")
"""Paths that need the API key when one is set (the probes, /metrics and /docs do not)."""


class BodyTooLarge(HTTPException):
    """Raised while a streamed body passes the limit; FastAPI lets HTTP exceptions through
    its body parsing, and the app's handler turns it into the 413 error body."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(status_code=413, detail=_too_large_message(max_bytes))


def _too_large_message(max_bytes: int) -> str:
    return f"request body exceeds {max_bytes} bytes (TRIBUNAL_MAX_REQUEST_BYTES); split the batch"


class BodyLimitMiddleware:
    """Answer 401 when a ``/v1`` or ``/inspect`` request lacks the key (``api_key`` set: a
    bearer token, or for ``/inspect`` also the password of HTTP Basic), 413 when a
    request body exceeds ``max_bytes`` (declared or streamed), and tag every response with
    ``x-request-id`` (the client's, or a new one). The token is checked first, before the body
    is read: an unauthenticated client cannot make the service read 30 MB, nor learn from a
    422 how its body would have been parsed.

    Args:
        app: The wrapped app.
        max_bytes: Largest accepted body.
        api_key: The bearer token ``/v1`` routes require, or None for no authentication.
    """

    def __init__(self, app: ASGIApp, max_bytes: int, api_key: str | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.api_key = api_key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers", []))
        request_id = headers.get(b"x-request-id", b"").decode("latin-1")[:128]
        request_id = request_id or uuid.uuid4().hex
        if not self._authorized(scope, headers):
            await _send_error(
                send,
                request_id,
                401,
                "unauthorized",
                "missing or wrong bearer token: send 'Authorization: Bearer <key>'",
                basic=str(scope.get("path", "")).startswith("/inspect"),
            )
            return
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await _send_error(
                send, request_id, 413, "payload_too_large", _too_large_message(self.max_bytes)
            )
            return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return message

        async def tagged_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {
                    **message,
                    "headers": [
                        *message.get("headers", []),
                        (b"x-request-id", request_id.encode()),
                    ],
                }
            await send(message)

        await self.app(scope, limited_receive, tagged_send)

    def _authorized(self, scope: Scope, headers: dict[bytes, bytes]) -> bool:
        path = str(scope.get("path", ""))
        if self.api_key is None or not path.startswith(GUARDED):
            return True
        scheme, _, token = headers.get(b"authorization", b"").partition(b" ")
        key = self.api_key.encode()
        if scheme.lower() == b"bearer":
            return secrets.compare_digest(token, key)
        # A browser cannot send a bearer token when it opens a page: /inspect also takes the
        # key as the password of HTTP Basic authentication (any user name), which it asks for.
        if scheme.lower() == b"basic" and path.startswith("/inspect"):
            try:
                password = base64.b64decode(token, validate=True).partition(b":")[2]
            except binascii.Error:
                return False
            return secrets.compare_digest(password, key)
        return False


async def _send_error(
    send: Send, request_id: str, status: int, code: str, message: str, basic: bool = False
) -> None:
    body: dict[str, Any] = {
        "error": {
            "code": code,
            "message": message,
            "field": None,
            "retryable": False,
            "job_id": None,
        }
    }
    payload = json.dumps(body).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
        (b"x-request-id", request_id.encode()),
    ]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
        if basic:  # the browser's own prompt for /inspect; the key is the password
            headers.append((b"www-authenticate", b'Basic realm="Tribunal inspector"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
