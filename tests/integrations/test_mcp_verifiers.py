"""The MCP servers of the math, judge and citation services (``/v1/mcp``, one ``score_<verifier>``
tool each) called by the ``mcp`` SDK's own client (2.0.0, pinned in the lock) over streamable
HTTP, against real processes (API, worker, Redis), with ``TRIBUNAL_API_KEY`` set."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import ROOT, RedisServer, RunningService, redis_env
from tests.integrations.test_mcp import call, client
from tribunal.llm.testing import FakeOpenAIServer

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

KEY = "mcp-verifiers-key"

CITED = {
    "response": "<answer><cite id=S2>Bananas are rich in potassium.</cite></answer>",
    "evidence": {"S2": "Bananas are rich in potassium."},
    "options": {"support": "none"},
}


async def scenario(urls: dict[str, str]) -> None:
    cases: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
        ("math", {"response": "So \\boxed{18}.", "ground_truth": "18"}, {"ground_truth": ""}),
        (
            "judge",
            {
                "question": "Boiling point?",
                "response": "100 °C",
                "rubrics": [{"description": "States 100 °C", "weight": 1}],
                "rubric_sets": [],
            },
            {"rubrics": [], "rubric_sets": []},
        ),
        ("citation", CITED, {"options": {"support": "judge"}}),  # no LLM backend: unscorable
    ]
    for name, item, broken in cases:
        async with client(urls[name], KEY) as session:
            tools = [tool.name for tool in (await session.list_tools()).tools]
            assert tools == [f"score_{name}"]
            failed, scored = await call(session, f"score_{name}", item=item)
            assert not failed and scored["reward"] == 1.0, scored
            assert scored["verifier"]["name"] == name
            # An item that cannot be scored is the tool's error, never a reward of 0.
            failed, refused = await call(session, f"score_{name}", item={**item, **broken})
            assert failed and re.search(r"(bad_input|backend_unavailable): ", refused), refused
    with pytest.raises(Exception):  # noqa: B017 - the SDK's own error for an HTTP 401
        async with client(urls["math"], "wrong-key") as session:
            await session.list_tools()


def test_the_mcp_client_scores_with_each_verifier(
    service: Callable[..., RunningService],
    redis_server: RedisServer,
    key_prefix: str,
    openai_compat_server: FakeOpenAIServer,
) -> None:
    env = redis_env(redis_server, key_prefix, TRIBUNAL_API_KEY=KEY)
    judge_env = {**env, "TRIBUNAL_JUDGE_BASE_URL": openai_compat_server.base_url}
    urls = {
        "math": service("math", env=env).base_url,
        "judge": service("judge", env=judge_env).base_url,
        "citation": service("citation", env=env).base_url,
    }
    asyncio.run(scenario(urls))
    # The example of docs/integrations.md, as written.
    page = (ROOT / "docs" / "integrations.md").read_text()
    [example] = [b for b in re.findall(r"```python\n(.*?)```", page, re.S) if "8101/v1/mcp" in b]
    example = example.replace("http://127.0.0.1:8101", urls["math"])
    exec(example.replace("<key>", KEY), {"__name__": "example"})
