"""The code service's MCP server (``/v1/mcp``) called by the ``mcp`` SDK's own client (2.0.0,
pinned in the lock) over streamable HTTP, against real processes (API, worker, Redis) and
real sandboxes, with ``TRIBUNAL_API_KEY`` set: the key rule of every ``/v1`` route."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import shutil
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import httpx2
import pytest

from tests.conftest import ROOT, RedisServer, RunningService, redis_env

if TYPE_CHECKING:
    from mcp.client import Client

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed"),
]

KEY = "mcp-test-key"


@contextlib.asynccontextmanager
async def client(url: str, key: str) -> AsyncIterator[Client]:
    """An MCP client of the code service, with the key as a bearer token (the SDK is imported
    here, not at collection: some 0.6 s)."""
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {key}"}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        transport = streamable_http_client(f"{url}/v1/mcp", http_client=http)
        async with Client(transport) as session:
            yield session


async def call(session: Client, name: str, **arguments: Any) -> tuple[bool, Any]:
    """``(is_error, structured result or text)`` of one tool call."""
    result = await session.call_tool(name, arguments)
    if result.is_error:
        return True, result.content[0].text  # type: ignore[union-attr]
    if result.structured_content is not None:
        content = result.structured_content
        return False, content.get("result", content)
    return False, json.loads(result.content[0].text)  # type: ignore[union-attr]


async def scenario(url: str) -> None:
    async with client(url, KEY) as session:
        tools = {tool.name for tool in (await session.list_tools()).tools}
        assert tools == {"run_python", "start_session", "run_cell", "close_session", "score_code"}
        failed, ran = await call(session, "run_python", code="print(input()[::-1])", stdin="abc")
        assert not failed and ran["stdout"] == "cba\n" and ran["verdict"] == "accepted"
        failed, info = await call(session, "start_session")
        assert not failed
        sid = info["session_id"]
        await call(session, "run_cell", session_id=sid, code="total = 40")
        failed, cell = await call(session, "run_cell", session_id=sid, code="total + 2")
        assert not failed and cell["display"] == "42"
        assert (await call(session, "close_session", session_id=sid)) == (False, "closed")
        failed, lost = await call(session, "run_cell", session_id=sid, code="total")
        assert failed and "run_cell: session_lost: " in lost
        item = {
            "language": "python",
            "code": "def add(a, b):\n    return a + b\n",
            "tests": {
                "kind": "assert",
                "entry_point": "add",
                "test": "def check(candidate):\n    assert candidate(2, 3) == 5\n",
            },
        }
        failed, scored = await call(session, "score_code", item=item)
        assert not failed and scored["reward"] == 1.0
        failed, refused = await call(session, "score_code", item={**item, "tests": {"kind": "x"}})
        assert failed and "bad_input: " in refused  # an error, never a reward of 0
    with pytest.raises(Exception):  # noqa: B017 - the SDK's own error for an HTTP 401
        async with client(url, "wrong-key") as session:
            await session.list_tools()


def test_the_mcp_client_uses_the_interpreter_and_the_verifier(
    service: Callable[..., RunningService], redis_server: RedisServer, key_prefix: str
) -> None:
    env = redis_env(redis_server, key_prefix, TRIBUNAL_API_KEY=KEY, TRIBUNAL_CODE_MAX_SESSIONS="2")
    running = service("code", env=env)
    asyncio.run(scenario(running.base_url))
    # The example of docs/integrations.md, as written.
    page = (ROOT / "docs" / "integrations.md").read_text()
    [example] = [b for b in re.findall(r"```python\n(.*?)```", page, re.S) if "8102/v1/mcp" in b]
    example = example.replace("http://127.0.0.1:8102", running.base_url)
    exec(example.replace("<key>", KEY), {"__name__": "example"})
