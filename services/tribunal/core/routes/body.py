"""``JSONRoute``: the route class of the routes that take a JSON body (parsed with orjson).

Starlette parses a body with ``json.loads``: a tenth of the gateway's CPU per item on large
batches, where orjson takes a third of that. ``tribunal.wire.jsonparse.loads`` uses orjson
only where it reads the body exactly, and ``json`` for the rest (malformed JSON, ``NaN``, lone
surrogate escapes, integers past 64 bits, which orjson would read as floats), so every request
gets the answer ``json`` gave: the same value, or the same error (a lone surrogate in one item
is still that item's ``bad_input``).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

from tribunal.wire.jsonparse import loads


class _Request(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = loads(await self.body())
        return self._json


class JSONRoute(APIRoute):
    """An ``APIRoute`` whose request body is parsed with orjson where it is exact (``json``
    elsewhere)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            return await handler(_Request(request.scope, request.receive))

        return route
