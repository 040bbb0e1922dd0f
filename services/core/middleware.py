"""Pure ASGI middleware: a request-body byte limit and request ids."""

from __future__ import annotations

import json
import uuid
from typing import Any

from fastapi import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyTooLarge(HTTPException):
    """Raised while a streamed body passes the limit; FastAPI lets HTTP exceptions through
    its body parsing, and the app's handler turns it into the 413 error body."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(status_code=413, detail=_too_large_message(max_bytes))


def _too_large_message(max_bytes: int) -> str:
    return f"request body exceeds {max_bytes} bytes (TRIBUNAL_MAX_REQUEST_BYTES); split the batch"


class BodyLimitMiddleware:
    """Answer 413 when a request body exceeds ``max_bytes`` (declared or streamed), and tag
    every response with ``x-request-id`` (the client's, or a new one).

    Args:
        app: The wrapped app.
        max_bytes: Largest accepted body.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers", []))
        request_id = headers.get(b"x-request-id", b"").decode("latin-1")[:128]
        request_id = request_id or uuid.uuid4().hex
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._reject(send, request_id)
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

    async def _reject(self, send: Send, request_id: str) -> None:
        body: dict[str, Any] = {
            "error": {
                "code": "payload_too_large",
                "message": _too_large_message(self.max_bytes),
                "field": None,
                "retryable": False,
                "job_id": None,
            }
        }
        payload = json.dumps(body).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode()),
                    (b"x-request-id", request_id.encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})
