"""Prime Intellect's ``verifiers`` 0.4.0 (pinned in the lock) scoring traces through Tribunal:
its own ``Task.score`` runs the ``@vf.reward`` method that ``tribunal_reward`` makes, against a
running gateway and math service. No model runs: each trace is built with its final answer
(``root_reply``), as a harness leaves it."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest

from tests.conftest import DATA, ROOT, free_port, need_data, shared_service
from tribunal.client import ClientError
from tribunal.integrations.prime_verifiers import tribunal_reward

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def vf() -> ModuleType:
    """``verifiers.v1``, imported by the tests that use it: some 6 s of imports, which every
    collection of the suite paid when this module imported it."""
    return pytest.importorskip("verifiers.v1")


@pytest.fixture(scope="module")
def gsm8k_data(vf: ModuleType) -> type[Any]:
    """A GSM8K row as a verifiers task: the prompt and the number after ``####``."""

    class GSM8KData(vf.TaskData):  # type: ignore[misc, name-defined]
        answer: str | None = None

    return GSM8KData


@pytest.fixture(scope="module")
def gsm8k_task(vf: ModuleType, gsm8k_data: type[Any]) -> Callable[..., type[Any]]:
    """``gsm8k_task(url, spec="rloo_math")``: a task class whose reward is Tribunal's ``spec``
    on the gateway at ``url``."""

    def task_class(url: str, spec: str = "rloo_math") -> type[Any]:
        class GSM8KTask(vf.Task[gsm8k_data]):  # type: ignore[misc, name-defined]
            correct = vf.reward(tribunal_reward(spec, name="correct", url=url))

        return GSM8KTask

    return task_class


def trace_of(task: Any, reply: str) -> Any:
    """A trace of ``task`` whose agent answered ``reply``."""
    import verifiers.v1 as vf
    from verifiers.v1.trace import TraceTask

    return vf.Trace(
        task=TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
        agent=vf.AgentInfo(config=vf.AgentConfig()),
        root_reply=reply,
    )


@pytest.fixture(scope="module")
def gateway_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A gateway and a math service, started once: every test only scores through them."""
    memory = {"TRIBUNAL_QUEUE": "memory", "TRIBUNAL_MATH_PROCESSES": "1"}
    with shared_service(request, "math", env=memory) as math:
        env = {**memory, "TRIBUNAL_GATEWAY_MATH_URL": math.base_url}
        with shared_service(request, "gateway", env=env) as gateway:
            yield gateway.base_url


async def score_all(tasks: list[Any], replies: list[str]) -> list[Any]:
    """Each task's ``Task.score`` on a trace of its reply, concurrently (as a group is)."""
    traces = [trace_of(task, reply) for task, reply in zip(tasks, replies, strict=True)]
    await asyncio.gather(*(task.score(trace) for task, trace in zip(tasks, traces, strict=True)))
    return traces


def test_a_task_scores_gsm8k_traces_through_tribunal(
    gsm8k_task: Callable[..., type[Any]], gsm8k_data: type[Any], gateway_url: str
) -> None:
    rows = [
        json.loads(line)
        for line in need_data(DATA / "math" / "gsm8k_test.jsonl").read_text().splitlines()[:4]
    ]
    task_cls = gsm8k_task(gateway_url)
    tasks, replies, expected = [], [], []
    for row in rows:
        answer = row["answer"].split("####")[-1].strip()
        task = task_cls(gsm8k_data(prompt=row["question"], answer=answer))
        wrong = row["answer"].rsplit("####", 1)[0] + f"#### {int(answer) + 1}"
        tasks += [task, task]
        replies += [row["answer"], wrong]
        expected += [1.0, 0.0]
    traces = asyncio.run(score_all(tasks, replies))
    assert [trace.reward for trace in traces] == expected
    # The spec's components are metrics, recorded beside the reward, not summed into it.
    assert [trace.metrics for trace in traces] == [{"correct/math": r} for r in expected]
    assert all(set(trace.rewards) == {"correct"} for trace in traces)


def test_the_documented_task(
    vf: ModuleType, gateway_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = (ROOT / "docs" / "integrations.md").read_text()
    [block] = [b for b in re.findall(r"```python\n(.*?)```", page, re.S) if "vf.Task" in b]
    monkeypatch.setenv("TRIBUNAL_GATEWAY_URL", gateway_url)
    namespace: dict[str, Any] = {}
    exec(block, namespace)  # the documentation's own example, as written
    task = namespace["GSM8KTask"](namespace["GSM8KData"](prompt="2+2?", answer="4"))
    [right, wrong] = asyncio.run(score_all([task, task], ["\\boxed{4}", "\\boxed{5}"]))
    assert (right.reward, wrong.reward) == (1.0, 0.0)
    assert right.metrics == {"correct/math": 1.0}


def test_a_spec_with_components(
    gsm8k_task: Callable[..., type[Any]], gsm8k_data: type[Any], gateway_url: str
) -> None:
    task = gsm8k_task(gateway_url, spec="tcr_agent")(gsm8k_data(prompt="2+2?", answer="4"))
    [right, wrong] = asyncio.run(score_all([task, task], ["\\boxed{4}", "\\boxed{5}"]))
    assert (right.reward, wrong.reward) == (1.0, -1.0)
    assert wrong.metrics == {
        "correct/correct": 0.0,
        "correct/num_turns": 2.0,
        "correct/overlong": 0.0,
    }


def test_what_a_verifiers_user_sees_on_errors(
    gsm8k_task: Callable[..., type[Any]], gsm8k_data: type[Any], gateway_url: str
) -> None:
    from verifiers.v1.errors import TaskError

    # A task without its answer: refused by name before any request.
    task = gsm8k_task(gateway_url)(gsm8k_data(prompt="2+2?"))
    with pytest.raises(TaskError, match=r"task\.answer is missing"):
        asyncio.run(task.score(trace_of(task, "4")))
    # A refused item (an empty answer): the gateway's reason, as a task error, not a 0.
    task = gsm8k_task(gateway_url)(gsm8k_data(prompt="2+2?", answer=""))
    trace = trace_of(task, "4")
    with pytest.raises(TaskError, match=r"RewardUnavailable: item 0: bad_input"):
        asyncio.run(task.score(trace))
    assert trace.rewards == {"correct": None}  # seeded unscored, never 0
    # An unknown spec: refused by the gateway.
    task = gsm8k_task(gateway_url, spec="no_such_spec")(gsm8k_data(prompt="2+2?", answer="4"))
    with pytest.raises(TaskError, match="no_such_spec"):
        asyncio.run(task.score(trace_of(task, "4")))
    # A gateway that is down: the client's error after its retries.
    task = gsm8k_task(f"http://127.0.0.1:{free_port()}")(gsm8k_data(prompt="2+2?", answer="4"))
    with pytest.raises(TaskError, match="task GSM8KTask scoring") as down:
        asyncio.run(task.score(trace_of(task, "4")))
    assert isinstance(down.value.__cause__, ClientError)
