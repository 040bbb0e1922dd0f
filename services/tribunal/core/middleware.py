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

KEY_PATH_PREFIX = "/k/"
"""Routes under ``/k/<key>/`` carry the key in their path, for clients that send no header."""


def presented_key(authorization: str) -> str | None:
    """The key an ``Authorization`` header presents: a Bearer token, or the password of Basic
    credentials (any user name: what aiohttp sends for ``http://<user>:<key>@host/``); None
    for anything else."""
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() == "bearer":
        return token
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(token.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    _user, colon, password = decoded.partition(":")
    return password if colon else None


def key_matches(given: str | None, expected: str) -> bool:
    """Whether ``given`` is ``expected``, compared in constant time."""
    return given is not None and secrets.compare_digest(given.encode(), expected.encode())


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
    bearer token, or the password of HTTP Basic credentials; under ``/k/<key>/``, the path's
    key; a browser is asked for Basic credentials on ``/inspect`` only), 413 when a
    request body exceeds ``max_bytes`` (declared or streamed), and tag every response with
    ``x-request-id`` (the client's, or a new one). The token is checked first, before the body
    is read: an unauthenticated client cannot make the service read 30 MB, nor learn from a
    422 how its body would have been parsed.

    Args:
        app: The wrapped app.
        max_bytes: Largest accepted body.
        api_key: The key the guarded routes require, or None for no authentication.
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
                "missing or wrong key: send 'Authorization: Bearer <key>' (or Basic credentials "
                "with the key as password; /k/<key>/ in the path on the trainer routes)",
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
        if self.api_key is None:
            return True
        if path.startswith(KEY_PATH_PREFIX):
            token = path[len(KEY_PATH_PREFIX) :].partition("/")[0]
            return key_matches(token, self.api_key)
        if not path.startswith(GUARDED):
            return True
        authorization = headers.get(b"authorization", b"").decode("latin-1")
        return key_matches(presented_key(authorization), self.api_key)


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
