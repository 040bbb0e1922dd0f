"""The environment server's app: the Open Reward Standard (:mod:`tribunal.envs.ors`), OpenEnv
(:mod:`tribunal.envs.openenv`) and NeMo Gym's resources servers (:mod:`tribunal.envs.nemo_gym`)
over the same environments and services, one API-key
rule for both (``TRIBUNAL_API_KEY``: ``X-API-Key`` or ``Authorization: Bearer``; for OpenEnv's
client, which sends no headers, ``/k/<key>/openenv/...`` in the path)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse

from tribunal.core.middleware import key_matches, presented_key
from tribunal.envs.nemo_gym import router as nemo_gym_router
from tribunal.envs.openenv import router as openenv_router
from tribunal.envs.ors import EnvsSettings, OrsServer
from tribunal.envs.ors import router as ors_router


def create_app(settings: EnvsSettings | None = None) -> FastAPI:
    """The environment server: ORS's routes and OpenEnv's over one set of episodes' services
    (see :mod:`tribunal.envs.ors` and :mod:`tribunal.envs.openenv` for the routes)."""
    server = OrsServer(settings or EnvsSettings())

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        for sid in list(server.held):
            await server.close(sid)
        await server.verifiers.aclose()

    app = FastAPI(title="Tribunal environments (Open Reward Standard)", lifespan=lifespan)
    app.state.ors = server

    @app.middleware("http")
    async def require_key(request: Request, call_next: Any) -> Response:
        expected = server.settings.api_key
        if expected is not None and request.url.path != "/health":
            path = request.url.path
            in_path = path.split("/")[2] if path.startswith("/k/") else None
            given = (
                in_path
                or request.headers.get("X-API-Key")
                or presented_key(request.headers.get("Authorization", ""))
            )
            if not key_matches(given, expected):
                return JSONResponse({"detail": "X-API-Key (TRIBUNAL_API_KEY) required"}, 401)
        response: Response = await call_next(request)
        return response

    app.include_router(ors_router)
    app.include_router(openenv_router)
    app.include_router(nemo_gym_router)
    # The same routes with the key in the path, for clients that send no headers.
    app.include_router(openenv_router, prefix="/k/{key}")
    return app
