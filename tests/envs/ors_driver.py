"""Episodes run by the released ``openreward`` client (0.1.167, from
requirements/protocol-envs/openreward.txt) against Tribunal's ORS server: run in
.venv-openreward by tests/envs/test_ors.py, which reads the JSON this prints.

    .venv-openreward/bin/python tests/envs/ors_driver.py episodes URL KEY BROKEN_URL
    .venv-openreward/bin/python tests/envs/ors_driver.py refiner URL
"""

import asyncio
import json
import sys

from openreward import AsyncOpenReward
from openreward.api.errors import ToolCallError, ToolFailed


async def episode(env, task, calls):
    """Run ``calls`` ([(tool, input)]) in a session of ``task``; each call's outcome."""
    outcomes = []
    async with env.session(task=task) as session:
        prompt = await session.get_prompt()
        tools = [tool.name for tool in await session.list_tools()]
        for name, arguments in calls:
            try:
                out = await session.call_tool(name, arguments)
            except ToolCallError as exc:
                outcomes.append({"refused": exc.reason})
                continue
            except ToolFailed as exc:
                outcomes.append({"failed": str(exc)})
                break
            outcome = {"text": out.blocks[0].text, "reward": out.reward, "finished": out.finished}
            error = (out.metadata or {}).get("error")
            if error is not None:  # graded steps carry none; a step not graded says why
                outcome["error"] = error
            outcomes.append(outcome)
    return {"prompt": prompt[0].text, "tools": tools, "calls": outcomes}


async def refiner(url):
    """One refiner episode answered with a cited claim."""
    client = AsyncOpenReward(api_key="ors-test-key")
    env = client.environments.get("tribunal", variant="refiner", base_url=url)
    task = await env.get_task("pubmed_trajectories", 0)
    answer = '<answer><cite id="30193240">HPD was seen with PD-1 inhibitors.</cite></answer>'
    report = await episode(env, task, [("submit", {"answer": answer})])
    await client.environments.aclose()
    print(json.dumps(report))


async def episodes(url, key, broken_url):
    client = AsyncOpenReward(api_key=key)
    report = {}
    math = client.environments.get("tribunal", variant="math", base_url=url)
    report["math_splits"] = await math.list_splits()
    report["gsm8k_tasks"] = await math.num_tasks("gsm8k_test")
    task = await math.get_task("gsm8k_test", 0)
    report["task_spec"] = task.task_spec
    report["math_right"] = await episode(
        math,
        task,
        [
            ("python", {"code": "eggs = 16 - 3 - 4"}),
            ("python", {"code": "print(eggs * 2)"}),
            ("submit", {"answer": "18"}),
            ("submit", {"answer": "18"}),
        ],
    )
    report["math_wrong"] = await episode(math, task, [("submit", {"answer": "19"})])
    # An answer the math verifier cannot decide within its deadline: a power tower.
    tower = "9^{9^{9^{9^{9}}}}"
    report["math_tower"] = await episode(math, task, [("submit", {"answer": tower})])
    report["math_bad"] = await episode(
        math, task, [("nope", {}), ("submit", {"answer": 18}), ("submit", {"answer": "1\n18"})]
    )
    code = client.environments.get("tribunal", variant="code", base_url=url)
    human = await code.get_task("humaneval", 2)
    program = "def truncate_number(number: float) -> float:\n    return number % 1.0\n"
    wrong = "def truncate_number(number: float) -> float:\n    return 1.0\n"
    report["code_right"] = await episode(code, human, [("submit", {"code": program})])
    report["code_wrong"] = await episode(code, human, [("submit", {"code": wrong})])
    # Bare paths: the environment named by the deployment (X-Deployment), no variant.
    bare = client.environments.get("code", base_url=url)
    report["bare_splits"] = await bare.list_splits()
    broken = client.environments.get("tribunal", variant="math", base_url=broken_url)
    report["math_broken"] = await episode(broken, task, [("submit", {"answer": "18"})])
    await client.environments.aclose()
    print(json.dumps(report))


if sys.argv[1] == "refiner":
    asyncio.run(refiner(sys.argv[2]))
else:
    asyncio.run(episodes(*sys.argv[2:5]))
