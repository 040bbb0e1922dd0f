"""NeMo Gym 0.4.0's own models (``BaseVerifyRequest``, ``BaseVerifyResponse``,
``AggregateMetrics``, the Responses objects) and its HTTP client code (``request``,
``raise_for_status`` and ``get_response_json`` of ``nemo_gym.server_utils``, on its global
aiohttp client) against Tribunal's resources-server routes: run in
.venv-nemo-gym (Python 3.12) by tests/envs/test_nemo_gym.py, which reads the JSON this prints.

    .venv-nemo-gym/bin/python tests/envs/nemo_gym_driver.py URL KEY BROKEN_URL
"""

import asyncio
import json
import sys
from enum import Enum

from aiohttp import ClientResponseError
from nemo_gym.base_resources_server import BaseVerifyRequest, BaseVerifyResponse
from nemo_gym.config_types import AggregateMetrics
from nemo_gym.openai_utils import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming
from nemo_gym.server_utils import (
    GlobalAIOHTTPAsyncClientConfig,
    get_response_json,
    raise_for_status,
    request,
    set_global_aiohttp_client,
)


def response(text):
    """A Responses object whose one assistant message says ``text``, preceded by reasoning."""
    return NeMoGymResponse.model_validate(
        {
            "id": "resp_1",
            "created_at": 0,
            "model": "policy",
            "object": "response",
            "parallel_tool_calls": False,
            "tool_choice": "auto",
            "tools": [],
            "output": [
                {
                    "id": "rs_1",
                    "type": "reasoning",
                    "summary": [{"type": "summary_text", "text": "\\boxed{17}"}],
                },
                {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                },
            ],
        }
    )


def verify_body(text, **task):
    params = NeMoGymResponseCreateParamsNonStreaming(input="Janet's ducks ...")
    verify = BaseVerifyRequest(responses_create_params=params, response=response(text))
    return {**verify.model_dump(mode="json"), **task}


HEADERS = {}


class ReverifyMode(str, Enum):  # noqa: UP042 - quoted as NeMo Gym declares it
    """Newer NeMo Gym's declaration of a resources server's re-verification, quoted from
    ``nemo_gym/base_resources_server.py`` at commit 07d6b0d07b22fcf530b4c211dae2ee23100428e4
    (August 2026; not in 0.4.0, and its releases that have it need Python 3.13.14)."""

    STATELESS = "stateless"
    UNSUPPORTED = "unsupported"
    UNKNOWN = "unknown"


async def check_reverify_mode(url):
    """Each server's mode read as ``gym eval reverify`` reads it (``_check_reverify_mode`` of
    ``nemo_gym/rollout_reverification.py`` at the same commit, its ``server_client.get`` as
    0.4.0's ``request``): ``raise_for_status``, then ``ReverifyMode(<response JSON>)``."""
    modes = {}
    for name in ("math", "code"):
        res = await request("GET", f"{url}/nemo_gym/{name}/reverify_mode", headers=dict(HEADERS))
        await raise_for_status(res)
        modes[name] = ReverifyMode(await get_response_json(res)).value
    return modes


async def post(url, body):
    """NeMo Gym's request: ``(status, JSON)``; an error status as NeMo Gym raises it."""
    answer = await request("POST", url, json=body, headers=dict(HEADERS))
    try:
        await raise_for_status(answer)
    except ClientResponseError as exc:
        return exc.status, json.loads(exc.response_content)
    return answer.status, await get_response_json(answer)


async def main(url, key, broken_url):
    HEADERS["X-API-Key"] = key
    report = {}
    http = set_global_aiohttp_client(GlobalAIOHTTPAsyncClientConfig())
    math = f"{url}/nemo_gym/math"
    status, _ = await post(f"{math}/seed_session", {})
    report["seed"] = status
    verified = []
    for text in ("The answer is \\boxed{18}.", "So \\boxed{17}."):
        status, body = await post(f"{math}/verify", verify_body(text, expected_answer="18"))
        assert status == 200, body
        verified.append(BaseVerifyResponse.model_validate(body).reward)
    report["math"] = verified
    program = "```python\ndef add(a, b):\n    return a + b\n```"
    tests = {
        "kind": "assert",
        "entry_point": "add",
        "test": "def check(candidate):\n    assert candidate(2, 3) == 5\n",
    }
    body = verify_body(program, verifier_metadata={"tests": tests})
    status, answer = await post(f"{url}/nemo_gym/code/verify", body)
    report["code"] = BaseVerifyResponse.model_validate(answer).reward
    # Samples that cannot be graded: a row without its expected_answer, one the verifier
    # cannot read. Each is answered as NeMo Gym reads a verify response.
    failed = {}
    for case, task in (("no_answer", {}), ("unparseable", {"expected_answer": "\\frac{"})):
        status, answer = await post(f"{math}/verify", verify_body("18", **task))
        reward = BaseVerifyResponse.model_validate(answer).reward if status == 200 else None
        failed[case] = {"status": status, "reward": reward, "tribunal": answer.get("tribunal")}
    report["failed"] = failed
    report["reverify"] = await check_reverify_mode(url)
    # As rollout collection sends them: the verify responses without response and params.
    rows = [
        {"_ng_task_index": 0, "reward": 1.0, "tribunal": {"error": None}},
        {"_ng_task_index": 0, "reward": 0.0, "tribunal": {"error": None}},
        {"_ng_task_index": 1, "reward": 0.0, "tribunal": failed["no_answer"]["tribunal"]},
    ]
    status, answer = await post(f"{math}/aggregate_metrics", {"verify_responses": rows})
    report["aggregate"] = AggregateMetrics.model_validate(answer).model_dump()
    status, answer = await post(
        f"{broken_url}/nemo_gym/math/verify", verify_body("18", expected_answer="18")
    )
    report["broken"] = [status, answer["detail"]]
    await http.close()
    print(json.dumps(report))


asyncio.run(main(*sys.argv[1:4]))
