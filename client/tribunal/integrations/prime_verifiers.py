"""A reward for Prime Intellect's ``verifiers`` (v0.4, ``import verifiers.v1 as vf``), scored
on the gateway.

In verifiers 0.4 a task scores a trace with its ``@vf.reward`` methods, ``async (self, task,
trace) -> float``, summed by weight into ``trace.reward``; ``@vf.metric`` values are recorded
beside, not summed. :func:`tribunal_reward` makes such a method from a Tribunal spec::

    import verifiers.v1 as vf
    from tribunal.integrations.prime_verifiers import tribunal_reward

    class GSM8KTask(vf.Task[GSM8KData]):
        correct = vf.reward(tribunal_reward("rloo_math", name="correct"))

The rollout sent is the trace's final answer (``trace.last_reply``) as ``response``, the task's
prompt as ``question``, and task fields as rollout fields (``fields``, default
``{"ground_truth": "answer"}``). The spec's reward is the method's float; each of its components
is recorded as a metric ``<name>/<component>`` (a component the spec did not compute is left
out). A sample the gateway refused or could not score raises :class:`RewardUnavailable`, which
verifiers records on the trace as a task error (``TaskError``), never a reward of 0.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from tribunal.integrations._gateway import gateway_access, score_on_gateway
from tribunal.integrations.rollouts import RewardUnavailable, require_reward, rollout_item

__all__ = ["RewardUnavailable", "tribunal_reward"]

RewardMethod = Callable[[Any, Any, Any], Awaitable[float]]
"""``async (self, task, trace) -> float``: a verifiers 0.4 ``@vf.reward`` method."""


def tribunal_reward(
    spec: str,
    *,
    name: str = "tribunal",
    fields: Mapping[str, str] | None = None,
    url: str | None = None,
    api_key: str | None = None,
    timeout_s: float = 600.0,
) -> RewardMethod:
    """A ``@vf.reward`` method scoring a trace with ``spec`` on the gateway.

    Args:
        spec: The reward spec (``rloo_math``, ``tcr_agent`` ...).
        name: The method's ``__name__``, which verifiers uses as the reward's key in
            ``trace.rewards`` and which prefixes its metrics; give the attribute's name.
        fields: Rollout field -> attribute of the task data (``TaskData``) to send; default
            ``{"ground_truth": "answer"}``.
        url: The gateway (default ``TRIBUNAL_GATEWAY_URL``, else the local gateway on
            ``TRIBUNAL_GATEWAY_PORT``, else http://127.0.0.1:8100).
        api_key: Bearer token (default ``TRIBUNAL_API_KEY``).
        timeout_s: Deadline of each request.

    Returns:
        ``async (self, task, trace) -> float``, to decorate with ``vf.reward``.

    The method raises ``ValueError`` naming a task field that is missing, RewardUnavailable
    for an item the gateway refused or could not score, and ``tribunal.client.ClientError``
    when the gateway cannot be reached.
    """
    wanted = dict(fields if fields is not None else {"ground_truth": "answer"})

    async def reward(self: Any, task: Any, trace: Any) -> float:
        values: dict[str, Any] = {}
        for field, attribute in wanted.items():
            value = getattr(task, attribute, None)
            if value is None:
                raise ValueError(f"task.{attribute} is missing (rollout field {field!r})")
            values[field] = value
        prompt = getattr(task, "prompt_text", None)
        item = rollout_item(0, {"spec": spec}, trace.last_reply, prompt or None, values)
        base_url, key = gateway_access(url, api_key)
        [result] = await score_on_gateway(base_url, [item], key, timeout_s)
        score = require_reward(result)
        trace.record_metrics(
            {
                f"{name}/{component}": float(sub["reward"])
                for component, sub in result.details.get("sub_rewards", {}).items()
                if isinstance(sub.get("reward"), int | float)
            }
        )
        return score

    reward.__name__ = reward.__qualname__ = name
    return reward
