"""MCP servers on the services: each service's ``/v1/mcp``, and a verifier's scoring as a tool.

Every verifier service mounts its own MCP server (MCP's streamable HTTP transport, stateless,
JSON answers) at ``/v1/mcp`` on its own port, rather than one MCP server on the gateway for all
of them: a tool then goes through the service's own validation, result cache, queue and workers
in-process, as ``POST /v1/<verifier>/score`` does, with no extra HTTP hop; a verifier deployed
alone (the math service without a gateway) is still usable by an agent; and the API-key rule
is the service's own (``TRIBUNAL_API_KEY``: ``Authorization: Bearer <key>`` or 401), enforced by
the same middleware as every ``/v1`` route. The cost: an agent that wants the tools of several
verifiers connects to several URLs (agent frameworks take a list of MCP servers).

:func:`verifier_mount` gives a service one tool, ``score_<verifier>(item)``: one item of the
verifier, its result as ``POST /v1/<verifier>/score`` gives it. A failure is the tool's error
(MCP's ``isError`` result, its text naming Tribunal's error code: ``bad_input: ...``,
``backend_unavailable: ...``), never a result that reads as a reward of 0: an item that could
not be scored (``reward: null`` with an error) is an error too. The code service adds its
interpreter's tools (:mod:`tribunal.code.mcp_server`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI
from pydantic import ValidationError

from tribunal.core.deps import AppRuntime
from tribunal.wire.errors import TribunalError

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

logger = logging.getLogger(__name__)

MCP_PATH = "/v1/mcp"

ServerBuilder = Callable[[FastAPI], "MCPServer"]


def runtime_of(app: FastAPI) -> AppRuntime:
    """``app``'s runtime (built by its lifespan; a tool is only called while it runs)."""
    value: AppRuntime = app.state.runtime
    return value


@contextlib.contextmanager
def as_tool_error() -> Iterator[None]:
    """Tribunal's errors and bad arguments as the tool's error (``ToolError``), its code first."""
    from mcp.server.mcpserver.exceptions import ToolError

    try:
        yield
    except TribunalError as exc:
        raise ToolError(f"{exc.code}: {exc.message}") from exc
    except ValidationError as exc:
        raise ToolError(f"bad_input: {exc}") from exc


async def score_one(runtime: AppRuntime, verifier: str, item: dict[str, Any]) -> dict[str, Any]:
    """Score one item of ``verifier`` through the service's queue, as its score route does.

    Args:
        runtime: The service's runtime.
        verifier: The verifier's name (a key of ``runtime.services``).
        item: The item's fields, without ``id`` (the tool's result is one item's).

    Returns:
        The item's result (``ItemResult`` as JSON: ``reward``, ``details``, ``version``...).

    Raises:
        ToolError: The item is invalid (``bad_input: ...`` naming the field), could not be
            scored (its error's code and message), or the batch failed (a ``TribunalError``:
            ``queue_full``, ``timeout``...).
    """
    from mcp.server.mcpserver.exceptions import ToolError

    with as_tool_error():
        service = runtime.services[verifier]
        validated = service.verifier.item_model.model_validate({**item, "id": "mcp"})
        text = await service.score([validated], runtime.settings.sync_timeout_s)
    [result] = json.loads(text)["results"]
    error = result.get("error")
    if error is not None:
        raise ToolError(f"{error['code']}: {error['message']}")
    scored: dict[str, Any] = result
    return scored


def verifier_mount(
    verifier: str, description: str
) -> Callable[[FastAPI], contextlib.AbstractAsyncContextManager[None]]:
    """A ``ServiceSpec.mount`` serving ``score_<verifier>(item)`` at ``/v1/mcp``.

    Args:
        verifier: The verifier whose items the tool scores.
        description: The tool's description for the agent: what an item holds.
    """

    def build(app: FastAPI) -> MCPServer:
        from mcp.server.mcpserver import MCPServer

        server = MCPServer(f"tribunal-{verifier}", instructions=__doc__)

        async def score(item: dict[str, Any]) -> dict[str, Any]:
            return await score_one(runtime_of(app), verifier, item)

        server.add_tool(score, name=f"score_{verifier}", description=description)
        return server

    return lambda app: serve(app, build)


def serve(app: FastAPI, build: ServerBuilder) -> contextlib.AbstractAsyncContextManager[None]:
    """Add ``/v1/mcp`` (the server ``build(app)`` makes) to ``app``; return the MCP session
    manager's run, for the app's lifespan (``ServiceSpec.mount``). Without the ``mcp`` package
    (the ``protocols`` extra) there is no ``/v1/mcp``, and the log says so once."""
    try:
        server = build(app)
    except ImportError:
        logger.info("the mcp package is not installed (tribunal[protocols]): no /v1/mcp here")
        return contextlib.nullcontext()
    asgi = server.streamable_http_app(
        streamable_http_path=MCP_PATH, stateless_http=True, json_response=True
    )
    router = APIRouter()
    router.routes.extend(asgi.routes)
    app.include_router(router)

    @contextlib.asynccontextmanager
    async def running() -> AsyncIterator[None]:
        # The session manager's task group must be left by the task that entered it: a task
        # of its own, since whoever runs the app's lifespan may start and stop it from two
        # tasks (a test's module-scoped fixture does).
        stop = asyncio.Event()
        started = asyncio.Event()

        async def run() -> None:
            async with server.session_manager.run():
                started.set()
                await stop.wait()

        task = asyncio.create_task(run())
        waiting = asyncio.ensure_future(started.wait())
        await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        if task.done():
            task.result()  # it failed to start: raise its error here
        try:
            yield
        finally:
            stop.set()
            await task

    return running()
