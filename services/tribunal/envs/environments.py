"""The environments, defined once for every protocol: ``math`` (GSM8K, MATH-500; graded by the
math verifier, with a Python interpreter session as a tool), ``code`` (HumanEval, MBPP;
graded by the code verifier's hidden tests, with the same interpreter as a tool) and
``refiner`` (a research question with its search results as the observation; the final answer
graded by the gateway's ``refiner_instance_rubrics`` spec: the rubric judge over the task's
rubrics plus the citation score).

An episode is a task and the tools' state. ``python`` runs a cell in a code-interpreter session
of the code service (started on the first call, state kept across calls, closed with the
episode); ``submit`` ends the episode with the verifier's reward. What is graded is the
``submit`` tool's declared argument (the final answer, the program), never the agent's prose.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from tribunal.client import ClientError, TribunalClient
from tribunal.envs.tasks import (
    REFINER_SPEC,
    Split,
    Task,
    gsm8k_task,
    humaneval_task,
    math500_task,
    mbpp_task,
    refiner_task,
)
from tribunal.wire.envelope import ItemError
from tribunal.wire.errors import INFRASTRUCTURE_CODES

MAX_ANSWER_CHARS = 10_000
"""Longest ``submit`` answer of the math environment (the math verifier's ground-truth cap)."""

MAX_CODE_CHARS = 100_000
"""Longest program or cell sent to the code service."""


FAILED_REWARD = 0.0
"""The reward of a submission the math or code verifier failed on (a timeout, a bad input of
its own): their lowest reward (math pays 0 or 1, code the share of tests passed), so that no
failure is paid more than an answer. A spec's submission (the refiner's) gets its spec's own
failed reward, which the gateway reports in the result (``details.failed_reward``)."""


class EpisodeError(Exception):
    """A step could not be scored or run: the infrastructure failed (a verifier down or full,
    the interpreter gone), or a spec that pays nothing for a failed item failed one. Never a
    reward of 0; each protocol answers it in its own error form.

    Attributes:
        code: The envelope's error class (``backend_unavailable``, ``timeout``,
            ``session_lost`` ...).
        retryable: Whether the same step again can help.
    """

    def __init__(self, code: str, message: str, *, retryable: bool) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.retryable = retryable


class ToolInputError(Exception):
    """A tool call the environment refuses as malformed (unknown tool, a missing or wrong
    argument, a call after the episode ended); ``reason`` is the Open Reward Standard's
    (``not_found``, ``input_validation``, ``episode_finished``)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class ContentRefused(ToolInputError):
    """A well-formed tool call whose argument's *content* the environment refuses (a math
    answer over several lines, an argument longer than the services take): text the policy
    wrote, not the action's shape. The episode goes on and the agent may try again; ORS
    answers it as any malformed call (``ok: false``, ``reason``), OpenEnv as an observation
    (``observation.metadata.error``) rather than an error message, since ``openenv-core``'s
    client raises on those and the rollout would end on the policy's text.

    Attributes:
        reason: ORS's reason (``input_validation``).
        field: The argument refused (``answer``, ``code``).
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__("input_validation", f"{field}: {message}")
        self.field = field


@dataclass(frozen=True)
class Step:
    """What one tool call gives back.

    Attributes:
        text: The observation shown to the agent.
        reward: The verifier's reward (``None`` for a step that is not graded).
        finished: Whether the episode ended.
        metadata: The verifier's result (details, version) for the trainer's logs.
    """

    text: str
    reward: float | None = None
    finished: bool = False
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Tool:
    """A tool as the protocols list it: name, description, JSON schema of its input."""

    name: str
    description: str
    input_schema: Mapping[str, Any]


def _string_input(name: str, description: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": "string", "description": description}},
        "required": [name],
        "additionalProperties": False,
    }


PYTHON_TOOL = Tool(
    "python",
    "Run Python in your own interpreter; variables and imports persist across calls. "
    "Returns stdout, stderr and the last expression's value.",
    _string_input("code", "Python source, run as one cell."),
)


class Verifiers:
    """Tribunal's services as an environment reaches them: the math and code verifiers and the
    gateway (``POST /v1/<verifier>/score``), and the code service's interpreter sessions.

    Args:
        math_url: The math service.
        code_url: The code service.
        gateway_url: The gateway (reward specs: the refiner's).
        api_key: Sent as a bearer token where the services require one.
        timeout_s: Per request, seconds.
        max_retries: Retries of a request that failed in transport or was shed (429/503).
    """

    def __init__(
        self,
        math_url: str,
        code_url: str,
        gateway_url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 120,
        max_retries: int = 6,
    ) -> None:
        self.clients = {
            name: TribunalClient(url, api_key=api_key, timeout=timeout_s, max_retries=max_retries)
            for name, url in (("math", math_url), ("code", code_url), ("gateway", gateway_url))
        }
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
        self.sessions = httpx.AsyncClient(base_url=code_url, headers=headers, timeout=timeout_s)

    async def aclose(self) -> None:
        """Close every connection."""
        for client in self.clients.values():
            await client.aclose()
        await self.sessions.aclose()

    async def score(self, verifier: str, item: Mapping[str, Any]) -> Step:
        """Score one item with ``verifier`` (``math``, ``code``, or ``gateway`` for a spec
        item); its result's reward as a finished step, with ``error`` null in its metadata.

        An item the verifier failed on (a timeout, a bad input) is a finished step too: the
        protocols carry a reward and metadata, and a failure the submission may have caused
        must not end the rollout. Its reward is the failed reward (:data:`FAILED_REWARD`;
        a spec item's is its spec's, ``details.failed_reward``), and its metadata's
        ``error`` is the item's error (``code``, ``message``, ``retryable``, ``field``).

        Raises:
            EpisodeError: The request failed, or the item's error is the infrastructure's
                (a verifier down or full: a retry may cure it), or a spec item failed under a
                spec that pays nothing for it: its error class and whether a retry can help,
                never a reward of 0.
        """
        client = self.clients[verifier]
        try:
            (result,) = await client.score(verifier, [item])
        except ClientError as exc:
            raise EpisodeError("backend_unavailable", str(exc), retryable=True) from exc
        metadata: dict[str, Any] = {
            "details": result.details,
            "verifier": result.verifier.model_dump(),
            "error": None,
        }
        if result.error is None and result.reward is not None:
            return Step(f"Submitted. Reward: {result.reward:g}", result.reward, True, metadata)
        error = result.error or ItemError(code="no_reward", message="", retryable=False)
        paid = result.details.get("failed_reward") if verifier == "gateway" else FAILED_REWARD
        if error.code in INFRASTRUCTURE_CODES or not isinstance(paid, int | float):
            raise EpisodeError(error.code, error.message, retryable=error.retryable)
        metadata["error"] = error.model_dump()
        text = f"Submitted. Not graded ({error.code}: {error.message}). Reward: {paid:g}"
        return Step(text, float(paid), True, metadata)

    async def start_session(self) -> str:
        """Start an interpreter session on the code service; return its id.

        Raises:
            EpisodeError: The code service refused or failed (its error class).
        """
        body = await self._call("POST", "/v1/code/sessions", {})
        return str(body["session_id"])

    async def run_cell(self, session_id: str, code: str) -> Step:
        """Run one cell in the session; its output as an observation (not graded).

        Raises:
            EpisodeError: The session is gone (``session_lost``) or the service failed.
        """
        body = await self._call("POST", f"/v1/code/sessions/{session_id}/run", {"code": code})
        parts = [body.get("stdout", ""), body.get("stderr", "")]
        if body.get("display") is not None:
            parts.append(str(body["display"]))
        if body.get("error"):
            parts.append(f"{body['error']['ename']}: {body['error']['evalue']}")
        if body.get("status") in {"timeout", "crashed"}:
            parts.append(f"[{body['status']}]")
        return Step("".join(p if p.endswith("\n") or not p else p + "\n" for p in parts))

    async def close_session(self, session_id: str) -> None:
        """Close the session (a session already gone is not an error here)."""
        try:
            await self.sessions.delete(f"/v1/code/sessions/{session_id}")
        except httpx.HTTPError:
            return

    async def _call(self, method: str, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        try:
            response = await self.sessions.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise EpisodeError("backend_unavailable", str(exc), retryable=True) from exc
        if response.status_code >= 400:
            error = _error_body(response)
            raise EpisodeError(
                str(error.get("code", f"http_{response.status_code}")),
                str(error.get("message", response.text[:500])),
                retryable=bool(error.get("retryable", response.status_code >= 500)),
            )
        payload: dict[str, Any] = response.json()
        return payload


def _error_body(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    error = body.get("error", body.get("detail")) if isinstance(body, dict) else None
    return error if isinstance(error, dict) else {}


class Episode:
    """One episode of an environment: its task, the interpreter session it opened, whether
    it ended. Not shared between clients; a protocol keeps one per session."""

    def __init__(self, env: Environment, task: Task, verifiers: Verifiers) -> None:
        self.env = env
        self.task = task
        self.verifiers = verifiers
        self.finished = False
        self.session_id: str | None = None

    async def call(self, name: str, arguments: Mapping[str, Any]) -> Step:
        """Run tool ``name`` with ``arguments``.

        Raises:
            ToolInputError: Unknown tool, a missing or mistyped argument, or the episode
                already ended.
            ContentRefused: An argument's content refused (see the class); the episode goes
                on.
            EpisodeError: A verifier or the interpreter failed.
        """
        if self.finished:
            raise ToolInputError("episode_finished", "the episode has ended (submit was called)")
        tools = {tool.name: tool for tool in self.env.tools}
        if name not in tools:
            raise ToolInputError("not_found", f"unknown tool {name!r}; tools: {sorted(tools)}")
        (argument,) = tools[name].input_schema["required"]
        value = _argument(arguments, argument, tools[name].input_schema)
        if name == "python":
            if self.session_id is None:
                self.session_id = await self.verifiers.start_session()
            return await self.verifiers.run_cell(self.session_id, value)
        step = await self.verifiers.score(self.env.verifier, self.env.item(self.task, value))
        self.finished = True
        await self.close()
        return step

    async def close(self) -> None:
        """Close the interpreter session, if one was opened."""
        if self.session_id is not None:
            session_id, self.session_id = self.session_id, None
            await self.verifiers.close_session(session_id)


def _argument(arguments: Mapping[str, Any], name: str, schema: Mapping[str, Any]) -> str:
    extra = set(arguments) - set(schema["properties"])
    if extra:
        raise ToolInputError("input_validation", f"unknown argument(s) {sorted(extra)}")
    value = arguments.get(name)
    if not isinstance(value, str):
        raise ToolInputError("input_validation", f"{name}: a string is required")
    if len(value) > MAX_CODE_CHARS:
        raise ContentRefused(name, f"longer than {MAX_CODE_CHARS} chars")
    return value


@dataclass(frozen=True)
class Environment:
    """An environment: its splits, tools, instructions and how a submission becomes the
    verifier's item.

    Attributes:
        name: Its name in the protocols (``math``).
        verifier: What grades ``submit``: ``math``, ``code``, or ``gateway`` (a spec).
        splits: Its task splits, by name.
        tools: Its tools (``submit`` last).
        instructions: Put before each task's prompt.
    """

    name: str
    verifier: str
    splits: Mapping[str, Split]
    tools: Sequence[Tool]
    instructions: str

    def task(self, split: str, index: int) -> Task:
        """Task ``index`` of ``split``.

        Raises:
            KeyError: No such split (the message lists them).
            IndexError: No such index.
        """
        if split not in self.splits:
            raise KeyError(f"unknown split {split!r}; splits: {sorted(self.splits)}")
        tasks = self.splits[split].tasks()
        if not 0 <= index < len(tasks):
            raise IndexError(f"index {index} is outside 0..{len(tasks) - 1} of {split}")
        return tasks[index]

    def prompt(self, task: Task) -> str:
        """The text the agent starts from."""
        return f"{self.instructions}\n\n{task.prompt}"

    def item(self, task: Task, submitted: str) -> dict[str, Any]:
        """The verifier's item for ``submitted`` (the ``submit`` tool's argument).

        Raises:
            ContentRefused: The submission cannot be graded as declared (a multi-line or
                overlong math answer).
        """
        if self.verifier == "math":
            if "\n" in submitted or len(submitted) > MAX_ANSWER_CHARS:
                raise ContentRefused("answer", "one line, the final answer")
            return {
                "id": task.id,
                "response": f"Answer: {submitted}",
                "ground_truth": task.private["ground_truth"],
                "options": {"answer_format": "answer_line"},
            }
        if self.verifier == "gateway":
            return {"id": task.id, "spec": REFINER_SPEC, "response": submitted, **task.private}
        return {"id": task.id, "language": "python", "code": submitted, **task.private}


MATH = Environment(
    "math",
    "math",
    {
        "gsm8k_test": Split("gsm8k_test", "test", "math/gsm8k_test.jsonl", gsm8k_task),
        "math500_test": Split("math500_test", "test", "math/math500_test.jsonl", math500_task),
    },
    (
        PYTHON_TOOL,
        Tool(
            "submit",
            "Submit your final answer (one line: a number or an expression). Ends the episode.",
            _string_input("answer", "The final answer only."),
        ),
    ),
    "Solve the problem. You may use the python tool; submit the final answer with submit.",
)

CODE = Environment(
    "code",
    "code",
    {
        "humaneval": Split("humaneval", "test", "code/humaneval.jsonl", humaneval_task),
        "mbpp_sanitized": Split("mbpp_sanitized", "test", "code/mbpp_sanitized.jsonl", mbpp_task),
    },
    (
        PYTHON_TOOL,
        Tool(
            "submit",
            "Submit the whole Python program; hidden tests grade it. Ends the episode.",
            _string_input("code", "The complete program."),
        ),
    ),
    "Write the program. You may try code with the python tool; submit it with submit.",
)

REFINER = Environment(
    "refiner",
    "gateway",
    {
        "pubmed_trajectories": Split(
            "pubmed_trajectories",
            "test",
            "research/drtulu_style_pubmed_trajectories.jsonl.gz",
            refiner_task,
        )
    },
    (
        Tool(
            "submit",
            "Submit your final answer: <answer>...</answer> with each claim cited. Ends the "
            "episode.",
            _string_input("answer", "The final answer with its citations."),
        ),
    ),
    "Answer the research question from the search results below.",
)

ENVIRONMENTS: Mapping[str, Environment] = {env.name: env for env in (MATH, CODE, REFINER)}
"""Every environment by name."""
