"""The gateway's slime route, called the way slime calls a remote reward model.

slime is not on PyPI, so its client is quoted here rather than imported: ``remote_rm`` of
``slime/rollout/rm_hub/__init__.py`` and ``Sample.get_reward_value`` of ``slime/utils/types.py``
(THUDM/slime at 624b824a898ab0ec1fcb4d373004c7f3852bf515, 2026; ``remote_rm`` as last changed
by 4c058f65c3d296db719f6cee9e7e67b2078b3e9c), which post ``{"prompt", "response", "label"}``,
raise on a non-2xx status and return the JSON reply as the reward (read at ``--reward-key``
when one is given). The shared session and the retry loop are left out (one try); the reward
is read as a float, as slime's advantages then use it.
Real processes: math and the gateway on the embedded queue.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest

from tests.conftest import RunningService

pytestmark = pytest.mark.e2e


async def remote_rm(args: Any, sample: Any) -> Any:
    """slime's ``remote_rm`` (its shared session and retries aside), as it posts and reads."""
    payload = {
        "prompt": sample.prompt,
        "response": sample.response,
        "label": sample.label,
    }
    async with aiohttp.ClientSession() as session, session.post(args.rm_url, json=payload) as resp:
        resp.raise_for_status()
        return await resp.json()


def reward_value(args: Any, reward: Any) -> float:
    """slime's ``Sample.get_reward_value``: the reply, or its ``--reward-key`` entry."""
    return float(reward if not args.reward_key else reward[args.reward_key])


@pytest.fixture
def gateway_url(service: Callable[..., RunningService]) -> str:
    memory = {"TRIBUNAL_QUEUE": "memory", "TRIBUNAL_MATH_PROCESSES": "1"}
    math = service("math", env=memory)
    return service("gateway", env={**memory, "TRIBUNAL_GATEWAY_MATH_URL": math.base_url}).base_url


def sample(
    response: str, label: Any, prompt: Any = "Janet has 3 eggs and buys 4. How many?"
) -> Any:
    return types.SimpleNamespace(prompt=prompt, response=response, label=label)


def test_slime_gets_each_samples_reward(gateway_url: str) -> None:
    args = types.SimpleNamespace(rm_url=f"{gateway_url}/slime/rloo_math", reward_key=None)
    right = asyncio.run(remote_rm(args, sample("3 + 4 = 7\n#### 7", "7")))
    wrong = asyncio.run(remote_rm(args, sample("3 + 4 = 8\n#### 8", "7")))
    assert (reward_value(args, right), reward_value(args, wrong)) == (1.0, 0.0)
    chat = [{"role": "user", "content": "Janet has 3 eggs and buys 4. How many?"}]
    assert asyncio.run(remote_rm(args, sample("Answer: 7", "7", chat))) == 1.0


def test_slime_with_a_reward_key_gets_the_components(gateway_url: str) -> None:
    args = types.SimpleNamespace(
        rm_url=f"{gateway_url}/slime/rloo_math/components", reward_key="reward"
    )
    reply = asyncio.run(remote_rm(args, sample("#### 7", "7")))
    assert reward_value(args, reply) == 1.0 and reply["reward"] == 1.0
    assert set(reply) > {"reward"}


def test_what_slime_sees_when_a_sample_cannot_be_scored(gateway_url: str) -> None:
    args = types.SimpleNamespace(rm_url=f"{gateway_url}/slime/rloo_math", reward_key=None)
    with pytest.raises(aiohttp.ClientResponseError) as refused:
        asyncio.run(remote_rm(args, sample("#### 7", None)))
    assert refused.value.status == 422
    unknown = types.SimpleNamespace(rm_url=f"{gateway_url}/slime/no_such_spec", reward_key=None)
    with pytest.raises(aiohttp.ClientResponseError) as missing:
        asyncio.run(remote_rm(unknown, sample("#### 7", "7")))
    assert missing.value.status == 422  # bad_input naming the spec and the known ones


def test_with_an_api_key_slime_gets_in_by_basic_credentials_or_the_key_path(
    service: Callable[..., RunningService],
) -> None:
    # slime's remote_rm posts to --rm-url with no header: the key goes in the URL's user
    # information (aiohttp sends it as Basic credentials) or in the path (/k/<key>/).
    key = "k3y-for-slime"
    memory = {"TRIBUNAL_QUEUE": "memory", "TRIBUNAL_MATH_PROCESSES": "1"}
    math = service("math", env=memory)
    gateway = service(
        "gateway",
        env={**memory, "TRIBUNAL_GATEWAY_MATH_URL": math.base_url, "TRIBUNAL_API_KEY": key},
    )
    host = gateway.base_url.removeprefix("http://")
    for url in (
        f"http://slime:{key}@{host}/slime/rloo_math",
        f"{gateway.base_url}/k/{key}/slime/rloo_math",
    ):
        args = types.SimpleNamespace(rm_url=url, reward_key=None)
        assert asyncio.run(remote_rm(args, sample("#### 7", "7"))) == 1.0
    args = types.SimpleNamespace(rm_url=f"{gateway.base_url}/k/{key}/slime/rloo_math/components")
    assert asyncio.run(remote_rm(args, sample("#### 7", "7")))["reward"] == 1.0
    for url in (f"{gateway.base_url}/slime/rloo_math", f"http://slime:nope@{host}/slime/rloo_math"):
        with pytest.raises(aiohttp.ClientResponseError) as refused:
            asyncio.run(remote_rm(types.SimpleNamespace(rm_url=url), sample("#### 7", "7")))
        assert refused.value.status == 401
        assert "nope" not in str(refused.value)  # aiohttp keeps the credentials out
