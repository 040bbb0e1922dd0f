"""An MCP server on the code service: the interpreter and the code verifier as tools.

Served at ``/v1/mcp`` (MCP's streamable HTTP transport, stateless, JSON answers) on the code
service's own port, so the same API-key rule holds as for every ``/v1`` route: with
``TRIBUNAL_API_KEY`` set, a client sends ``Authorization: Bearer <key>`` or gets 401.
Built with the ``mcp`` SDK (``MCPServer``); each tool goes through the same queue, sandbox
slots and sessions as the HTTP routes:

- ``run_python(code, stdin, timeout_s)``: one program, as ``POST /v1/code/run``;
- ``start_session()``, ``run_cell(session_id, code, timeout_s)``, ``close_session(session_id)``:
  a code-interpreter session (:mod:`tribunal.code.sessions`), as ``/v1/code/sessions``;
- ``score_code(item)``: one item of the ``code`` verifier (a program and its tests), its
  result as ``POST /v1/code/score`` gives it.

A failure is the tool's error (MCP's ``isError`` result, its text naming Tribunal's
error code: ``session_lost: ...``), never a result that reads as a reward of 0: ``score_code``
answers an item that could not be scored (``reward: null`` with an error) as an error too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI
from pydantic import ValidationError

from tribunal.code.runs import run_once
from tribunal.code.session_api import close_owned, open_session, run_in_session
from tribunal.code.session_models import CellRequest
from tribunal.core.deps import AppRuntime
from tribunal.wire.code import CodeItem, RunItem
from tribunal.wire.errors import TribunalError

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

logger = logging.getLogger(__name__)

MCP_PATH = "/v1/mcp"


def build_server(app: FastAPI) -> MCPServer:
    """The MCP server whose tools act on ``app``'s runtime (``app.state.runtime``).

    Raises:
        ImportError: The ``mcp`` package is not installed (the ``protocols`` extra).
    """
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    server = MCPServer("tribunal-code", instructions=__doc__)

    def runtime() -> AppRuntime:
        value: AppRuntime = app.state.runtime
        return value

    @server.tool()
    async def run_python(
        code: str, stdin: str = "", timeout_s: float | None = None
    ) -> dict[str, Any]:
        """Run a Python program once in the sandbox: stdout, stderr, exit code, verdict."""
        with _as_tool_error():
            limits = {} if timeout_s is None else {"limits": {"timeout_s": float(timeout_s)}}
            item = RunItem.model_validate(
                {"id": "mcp", "language": "python", "code": code, "stdin": stdin, **limits}
            )
            return (await run_once(item, runtime())).model_dump(mode="json", exclude_none=True)

    @server.tool()
    async def start_session() -> dict[str, Any]:
        """Start a sandboxed Python interpreter that keeps its state between calls."""
        with _as_tool_error():
            return (await open_session(runtime())).model_dump(mode="json")

    @server.tool()
    async def run_cell(
        session_id: str, code: str, timeout_s: float | None = None
    ) -> dict[str, Any]:
        """Run one cell in a session: stdout, stderr, the repr of its last expression."""
        with _as_tool_error():
            cell = CellRequest(code=code, timeout_s=timeout_s)
            result = await run_in_session(runtime(), session_id, cell)
            return result.model_dump(mode="json", exclude_none=True)

    @server.tool()
    async def close_session(session_id: str) -> str:
        """Close a session (its sandbox and files are gone)."""
        with _as_tool_error():
            await close_owned(runtime(), session_id)
            return "closed"

    @server.tool()
    async def score_code(item: dict[str, Any]) -> dict[str, Any]:
        """Score one item of the code verifier (`code`, `language`, `tests`...): its reward
        in [0, 1] and per-test verdicts, as `POST /v1/code/score` answers it."""
        with _as_tool_error():
            validated = CodeItem.model_validate({"id": "mcp", **item})
            text = await runtime().services["code"].score([validated], 60.0)
            [result] = json.loads(text)["results"]
            error = result.get("error")
            if error is not None:
                raise ToolError(f"{error['code']}: {error['message']}")
            scored: dict[str, Any] = result
            return scored

    return server


@contextlib.contextmanager
def _as_tool_error() -> Any:
    """Tribunal's errors and bad arguments as the tool's error, its code first."""
    from mcp.server.mcpserver.exceptions import ToolError

    try:
        yield
    except TribunalError as exc:
        raise ToolError(f"{exc.code}: {exc.message}") from exc
    except ValidationError as exc:
        raise ToolError(f"bad_input: {exc}") from exc


def mount(app: FastAPI) -> contextlib.AbstractAsyncContextManager[None]:
    """Add ``/v1/mcp`` to ``app``; return the MCP session manager's run, for the app's
    lifespan (``ServiceSpec.mount``). Without the ``mcp`` package (the ``protocols`` extra)
    there is no ``/v1/mcp``, and the log says so once."""
    try:
        server = build_server(app)
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

        async def serve() -> None:
            async with server.session_manager.run():
                started.set()
                await stop.wait()

        task = asyncio.create_task(serve())
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
