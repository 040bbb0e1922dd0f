"""Episodes run by TRL's OpenReward adapter (``trl.experimental.openreward`` of TRL 1.16.0, in
.venv-trl built from requirements/trainer-envs/trl.txt) against Tribunal's ORS server, driven as
``GRPOTrainer`` drives an ``environment_factory`` (trl/trainer/grpo_trainer.py): one instance per
rollout from the factory, its tools the public methods of the instance's class, ``reset(**row)``
with the dataset's row, each tool call ``tool_dict[name](**arguments)`` with an exception turned
into ``{"error": ...}``, and the reward from ``reward_funcs(environments=...)``. No model: the
calls are the ones a generation would make. Run by tests/envs/test_trl_ors.py, which reads the
JSON this prints.

    OPENREWARD_SESSION_URL=URL .venv-trl/bin/python tests/envs/trl_driver.py URL KEY BROKEN_URL
"""

import inspect
import json
import os
import sys
from typing import Any

from transformers.utils import get_json_schema
from trl.experimental.openreward import OpenRewardSpec


def rollouts(spec: OpenRewardSpec, calls: list[list[tuple[str, dict[str, Any]]]]) -> dict:
    """One rollout per entry of ``calls`` (its tool calls, [(name, arguments)]) on the first row
    of ``spec.train_dataset``; what the trainer would see of each."""
    factory = spec.environment_factory
    row = spec.train_dataset[0]
    environments = [factory() for _ in calls]
    report: dict[str, Any] = {"row": {k: v for k, v in row.items() if k != "prompt"}}
    # The trainer's tool surface: the class's functions but `reset`, `get_reward` and `_*`.
    methods = [
        name
        for name, _ in inspect.getmembers(type(environments[0]), predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    ]
    # The schema the chat template renders for the model (transformers' reading of the method).
    report["tools"] = {
        name: get_json_schema(getattr(environments[0], name))["function"] for name in methods
    }
    report["rollouts"] = []
    for environment, episode in zip(environments, calls, strict=True):
        observation = environment.reset(**row)
        tools = {name: getattr(environment, name) for name in methods}
        results = []
        for name, arguments in episode:
            # The trainer's own handling: an unknown name, or a call that raises, is the error.
            try:
                if name not in tools:
                    raise ValueError(f"Tool {name} not found.")
                results.append(tools[name](**arguments))
            except Exception as exc:
                results.append({"error": str(exc)})
        report["rollouts"].append(
            {
                "observation": observation,
                "results": results,
                "rewards": environment.rewards,
                "finished": environment.finished,
            }
        )
    inputs = {key: [row[key]] * len(calls) for key in row if key != "prompt"}
    report["reward_funcs"] = spec.reward_funcs(
        prompts=[row["prompt"]] * len(calls),
        completions=[[] for _ in calls],
        environments=environments,
        **inputs,
    )
    for environment in environments:
        environment._close()
    return report


def main(url: str, key: str, broken_url: str) -> None:
    # The SDK reaches an environment server at OPENREWARD_SESSION_URL (else at the `sessions.`
    # subdomain of the target, which a local server does not have).
    assert os.environ["OPENREWARD_SESSION_URL"] == url
    report = {}
    math = OpenRewardSpec(url, env_name="math", split="gsm8k_test", indices=[0], api_key=key)
    report["math"] = rollouts(
        math,
        [
            [
                ("python", {"code": "eggs = 16 - 3 - 4"}),
                ("python", {"code": "print(eggs * 2)"}),
                ("submit", {"answer": "18"}),
            ],
            [("submit", {"answer": "19"})],
            [("submit", {"answer": "1\n18"}), ("nope", {}), ("submit", {})],
        ],
    )
    code = OpenRewardSpec(url, env_name="code", split="humaneval", indices=[2], api_key=key)
    program = "def truncate_number(number: float) -> float:\n    return number % 1.0\n"
    wrong = "def truncate_number(number: float) -> float:\n    return 1.0\n"
    report["code"] = rollouts(
        code, [[("submit", {"code": program})], [("submit", {"code": wrong})]]
    )
    # A server whose math verifier cannot be reached (it asks for no key).
    os.environ["OPENREWARD_SESSION_URL"] = broken_url
    broken = OpenRewardSpec(broken_url, env_name="math", split="gsm8k_test", indices=[0])
    report["math_broken"] = rollouts(broken, [[("submit", {"answer": "18"})]])
    print(json.dumps(report))


main(*sys.argv[1:4])
