"""An MCP server on the code service: the interpreter and the code verifier as tools.

Served at ``/v1/mcp`` on the code service's own port, as every verifier service's MCP server
(:mod:`tribunal.core.mcp`: why one per service, the API-key rule, errors as the tool's error).
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

import contextlib
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI

from tribunal.code.runs import run_once
from tribunal.code.session_api import close_owned, open_session, run_in_session
from tribunal.code.session_models import CellRequest
from tribunal.core.mcp import as_tool_error, runtime_of, score_one, serve
from tribunal.wire.code import RunItem

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer


def build_server(app: FastAPI) -> MCPServer:
    """The MCP server whose tools act on ``app``'s runtime (``app.state.runtime``).

    Raises:
        ImportError: The ``mcp`` package is not installed (the ``protocols`` extra).
    """
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("tribunal-code", instructions=__doc__)

    @server.tool()
    async def run_python(
        code: str, stdin: str = "", timeout_s: float | None = None
    ) -> dict[str, Any]:
        """Run a Python program once in the sandbox: stdout, stderr, exit code, verdict."""
        with as_tool_error():
            limits = {} if timeout_s is None else {"limits": {"timeout_s": float(timeout_s)}}
            item = RunItem.model_validate(
                {"id": "mcp", "language": "python", "code": code, "stdin": stdin, **limits}
            )
            return (await run_once(item, runtime_of(app))).model_dump(
                mode="json", exclude_none=True
            )

    @server.tool()
    async def start_session() -> dict[str, Any]:
        """Start a sandboxed Python interpreter that keeps its state between calls."""
        with as_tool_error():
            return (await open_session(runtime_of(app))).model_dump(mode="json")

    @server.tool()
    async def run_cell(
        session_id: str, code: str, timeout_s: float | None = None
    ) -> dict[str, Any]:
        """Run one cell in a session: stdout, stderr, the repr of its last expression."""
        with as_tool_error():
            cell = CellRequest(code=code, timeout_s=timeout_s)
            result = await run_in_session(runtime_of(app), session_id, cell)
            return result.model_dump(mode="json", exclude_none=True)

    @server.tool()
    async def close_session(session_id: str) -> str:
        """Close a session (its sandbox and files are gone)."""
        with as_tool_error():
            await close_owned(runtime_of(app), session_id)
            return "closed"

    @server.tool()
    async def score_code(item: dict[str, Any]) -> dict[str, Any]:
        """Score one item of the code verifier (`code`, `language`, `tests`...): its reward
        in [0, 1] and per-test verdicts, as `POST /v1/code/score` answers it."""
        return await score_one(runtime_of(app), "code", item)

    return server


def mount(app: FastAPI) -> contextlib.AbstractAsyncContextManager[None]:
    """Add ``/v1/mcp`` to ``app``; return what runs beside its lifespan (``ServiceSpec.mount``)."""
    return serve(app, build_server)
