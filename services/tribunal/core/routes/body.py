"""``JSONRoute``: the route class of the routes that take a JSON body (parsed with orjson),
whose large bodies are parsed and validated off the event loop.

Starlette parses a body with ``json.loads``: a tenth of the gateway's CPU per item on large
batches, where orjson takes a third of that. ``tribunal.wire.jsonparse.loads`` uses orjson
only where it reads the body exactly, and ``json`` for the rest (malformed JSON, ``NaN``, lone
surrogate escapes, integers past 64 bits, which orjson would read as floats), so every request
gets the answer ``json`` gave: the same value, or the same error (a lone surrogate in one item
is still that item's ``bad_input``).

FastAPI parses and validates the body on the API's event loop: a second or more of CPU for a
batch of many MiB, during which the process answers nothing else (its health checks
included). A body over :data:`~tribunal.core.offload.INLINE_BYTES` is parsed, then validated
against the route's body model, in the loop's default executor
(:func:`~tribunal.core.offload.off_loop_if_large`); FastAPI is then handed what costs it
nothing to validate again:

- a valid body: the validated model (pydantic returns an instance of the model as it is);
- an invalid one: a :class:`_Invalid` stand-in, which fails at once (no attribute, no item,
  not None); the exception handler
  (``tribunal.core.app``) puts the body's own errors, kept by :func:`body_errors`, in place of
  that stand-in's. FastAPI's order is kept: the route's dependencies (the API key) run first,
  and errors of headers or query parameters come before the body's.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from fastapi import params
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

from tribunal.core.offload import INLINE_BYTES, off_loop_if_large
from tribunal.wire.jsonparse import loads

_BODY_ERRORS = "tribunal.body_errors"
"""The request scope's key of a large body's :class:`BodyErrors`."""

_LOC = ("body",)
"""Where FastAPI puts the errors of a route's one, not embedded, body model."""


@dataclass(frozen=True)
class BodyErrors:
    """The validation errors of a body validated off the loop, and its parsed value.

    Attributes:
        errors: FastAPI's errors of the body (``loc`` starting with ``"body"``), in order.
        body: The parsed JSON value (what FastAPI puts in ``RequestValidationError.body``).
        size: The body's length, bytes.
    """

    errors: list[dict[str, Any]]
    body: Any
    size: int


def body_errors(request: Request) -> BodyErrors | None:
    """The errors of the request's body where it was validated off the loop and failed (the
    ``RequestValidationError`` FastAPI then raises holds a stand-in's), else None."""
    found = request.scope.get(_BODY_ERRORS)
    return found if isinstance(found, BodyErrors) else None


class _Invalid:
    """What FastAPI is handed for a body that failed off the loop: no model, dict, list or
    None (an optional body would take None as valid), so its validation fails at once."""

    __slots__ = ()


def _parse_and_validate(data: bytes, field: Any) -> tuple[Any, BodyErrors | None]:
    value = loads(data)
    validated, errors = field.validate(value, {}, loc=_LOC)
    if errors:
        return _Invalid(), BodyErrors(errors=list(errors), body=value, size=len(data))
    return validated, None


class _Request(Request):
    body_field: Any = None
    """The route's body ``ModelField`` where FastAPI validates the whole body against it
    (one body parameter, not embedded), else None: a large body is then only parsed off the
    loop."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            data = await self.body()
            if self.body_field is None or len(data) <= INLINE_BYTES:
                self._json = await off_loop_if_large(len(data), loads, data)
            else:
                self._json, errors = await off_loop_if_large(
                    len(data), _parse_and_validate, data, self.body_field
                )
                if errors is not None:
                    self.scope[_BODY_ERRORS] = errors
        return self._json


class JSONRoute(APIRoute):
    """An ``APIRoute`` whose request body is parsed with orjson where it is exact (``json``
    elsewhere), and parsed and validated off the event loop where it is large."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        field = self.body_field
        # An embedded or form body is validated field by field, not as one model.
        whole = (
            field is not None
            and not self._embed_body_fields
            and not isinstance(field.field_info, params.Form)
        )

        async def route(request: Request) -> Response:
            wrapped = _Request(request.scope, request.receive)
            wrapped.body_field = field if whole else None
            return await handler(wrapped)

        return route
