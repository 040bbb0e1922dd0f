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
import httpx
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


async def remote_rm_failure(args: Any, sample: Any) -> tuple[Any, str | None]:
    """:func:`remote_rm`, with the answer's ``Tribunal-Item-Error`` header (which slime does
    not read)."""
    payload = {"prompt": sample.prompt, "response": sample.response, "label": sample.label}
    async with aiohttp.ClientSession() as session, session.post(args.rm_url, json=payload) as resp:
        resp.raise_for_status()
        return await resp.json(), resp.headers.get("Tribunal-Item-Error")


def test_a_sample_that_fails_gets_the_specs_failed_reward_and_says_why(gateway_url: str) -> None:
    # slime raises on a non-2xx answer and stops the rollout: a failed sample (a null label,
    # an item error of the spec) is answered with the spec's failed reward instead (rloo_math:
    # 0; tcr_agent: -2.1, its lowest), and the failure is in a header and in /components.
    for spec, reward, component in (("rloo_math", 0.0, "math"), ("tcr_agent", -2.1, "correct")):
        args = types.SimpleNamespace(rm_url=f"{gateway_url}/slime/{spec}", reward_key=None)
        for label, header in ((None, "bad_input; field=label"), ({"num_turns": 3}, None)):
            reply, failure = asyncio.run(remote_rm_failure(args, sample("#### 7", label)))
            assert reward_value(args, reply) == reward
            assert failure == (header or f"bad_input; field={component}.ground_truth")
        keyed = types.SimpleNamespace(
            rm_url=f"{gateway_url}/slime/{spec}/components", reward_key="reward"
        )
        reply = asyncio.run(remote_rm(keyed, sample("#### 7", None)))
        assert reward_value(keyed, reply) == reward and reply["failed"] == 1.0
        scored, failure = asyncio.run(remote_rm_failure(keyed, sample("#### 7", "7")))
        assert scored["reward"] == 1.0 and scored["failed"] == 0.0 and failure is None
    text = httpx.get(f"{gateway_url}/metrics").text
    assert (
        'tribunal_trainer_items_failed_total{code="bad_input",route="slime",spec="tcr_agent"} 3.0'
        in text
    )


def test_what_slime_sees_when_a_request_cannot_be_scored(gateway_url: str) -> None:
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
