"""Episodes run by the released ``openenv-core`` client (0.3.0, from
requirements/protocol-envs/openenv.txt) against Tribunal's OpenEnv routes: run in .venv-openenv
by tests/envs/test_openenv.py, which reads the JSON this prints.

    .venv-openenv/bin/python tests/envs/openenv_driver.py URL KEY BROKEN_URL
"""

import asyncio
import json
import sys

import requests
from openenv.core import GenericEnvClient
from openenv.core.env_server.types import ResetResponse, StepResponse
from openenv.core.rubrics.trajectory import ExponentialDiscountingTrajectoryRubric


class FinalReward(ExponentialDiscountingTrajectoryRubric):
    """OpenEnv's discounting rubric whose trajectory score is the final step's reward."""

    def score_trajectory(self, trajectory):
        return trajectory[-1][1].reward


def outcome(result):
    return {"observation": result.observation, "reward": result.reward, "done": result.done}


async def attempt(env, coroutine):
    try:
        return outcome(await coroutine)
    except RuntimeError as exc:  # the client's form of the server's error message
        return {"error": str(exc)}


async def main(url, key, broken_url):
    report = {}
    base = f"{url}/k/{key}/openenv"
    async with GenericEnvClient(base_url=f"{base}/math") as env:
        report["reset"] = outcome(await env.reset(split="gsm8k_test", index=0))
        report["cells"] = [
            outcome(await env.step({"tool": "python", "arguments": {"code": "eggs = 16 - 7"}})),
            outcome(await env.step({"tool": "python", "arguments": {"code": "eggs * 2"}})),
        ]
        report["state"] = await env.state()
        report["bad"] = await attempt(env, env.step({"tool": "nope"}))
        report["submit"] = outcome(
            await env.step({"tool": "submit", "arguments": {"answer": "18"}})
        )
        report["after"] = await attempt(
            env, env.step({"tool": "submit", "arguments": {"answer": "18"}})
        )
        # Text the policy writes that the environment refuses (an answer over several lines):
        # an observation, and the episode goes on to a paid answer, as on ORS. A mistyped
        # argument (the action's shape) stays OpenEnv's VALIDATION_ERROR.
        await env.reset(split="gsm8k_test", index=0)
        report["retry"] = [
            await attempt(env, env.step({"tool": "submit", "arguments": {"answer": answer}}))
            for answer in ("16 - 7 = 9\n9 * 2 = 18", 18, "18")
        ]
        report["retry_state"] = await env.state()
        await env.reset(split="gsm8k_test", index=0)  # a new episode on the same connection
        report["wrong"] = outcome(await env.step({"tool": "submit", "arguments": {"answer": "17"}}))
        # A per-step (trajectory) reward, checked against OpenEnv's own trajectory rubric.
        options = {"gamma": 0.5, "intermediate_reward": 0.25}
        await env.reset(split="gsm8k_test", index=0, trajectory=options)
        rubric = FinalReward(**options)
        steps = []
        for action in (
            {"tool": "python", "arguments": {"code": "eggs = 16 - 7"}},
            {"tool": "python", "arguments": {"code": "eggs * 2"}},
            {"tool": "submit", "arguments": {"answer": "18"}},
        ):
            result = await env.step(action)
            steps.append({**outcome(result), "rubric": rubric(action, result)})
        report["trajectory"] = steps
        report["rubric_step_rewards"] = rubric.compute_step_rewards()
        report["trajectory_state"] = await env.state()
        report["bad_trajectory"] = await attempt(
            env, env.reset(split="gsm8k_test", index=0, trajectory={"gamma": 2})
        )
        await env.reset(split="gsm8k_test", index=0)
        tower = {"tool": "submit", "arguments": {"answer": "9^{9^{9^{9^{9}}}}"}}
        report["tower"] = outcome(await env.step(tower))
    async with GenericEnvClient(base_url=f"{broken_url}/openenv/math") as env:
        await env.reset(split="gsm8k_test", index=0)
        report["broken"] = await attempt(
            env, env.step({"tool": "submit", "arguments": {"answer": "18"}})
        )
    # HTTP: no state between requests; the step names its task.
    headers = {"X-API-Key": key}
    reset = requests.post(f"{url}/openenv/code/reset", json={"seed": 7}, headers=headers)
    report["http_reset"] = ResetResponse.model_validate(reset.json()).model_dump()
    program = "def truncate_number(number: float) -> float:\n    return number % 1.0\n"
    action = {"tool": "submit", "arguments": {"code": program}, "split": "humaneval", "index": 2}
    step = requests.post(f"{url}/openenv/code/step", json={"action": action}, headers=headers)
    report["http_step"] = StepResponse.model_validate(step.json()).model_dump()
    # Over HTTP: a refused answer, and a program longer than the code service takes.
    report["http_refused"] = []
    for env_name, action in (
        ("math", {"tool": "submit", "arguments": {"answer": "9\n18"}, "split": "gsm8k_test"}),
        ("code", {"tool": "submit", "arguments": {"code": "#" * 100_001}, "split": "humaneval"}),
    ):
        step = requests.post(
            f"{url}/openenv/{env_name}/step",
            json={"action": {**action, "index": 0}},
            headers=headers,
        )
        answer = StepResponse.model_validate(step.json()).model_dump() if step.ok else step.text
        report["http_refused"].append([step.status_code, answer])
    refused = requests.post(f"{url}/openenv/code/reset", json={})
    report["http_no_key"] = refused.status_code
    print(json.dumps(report))


asyncio.run(main(*sys.argv[1:4]))
