"""Reward functions for TRL's ``GRPOTrainer`` that score on the gateway.

Example::

    from trl import GRPOConfig, GRPOTrainer
    from tribunal.integrations.trl import remote_reward

    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[remote_reward("rloo_math")],   # dataset column `ground_truth`
        train_dataset=dataset,
        args=GRPOConfig(...),
    )

Each call sends the whole batch (every completion of the step on this process) in **one**
request to ``POST /v1/score``, concurrently with TRL's other async reward functions, on a
client kept for the event loop TRL calls it on (one connection reused from step to step,
closed with the loop or at exit). The completion is the rollout's ``response``, the prompt
its ``question``, and every dataset column (``ground_truth``, ``tests``,
``positive_rubrics``, ``evidence``, ``num_turns`` ...) a rollout field of the same name
(``columns`` renames them). An item the gateway could not score is ``None``, which TRL treats
as missing (NaN, left out of the group baseline), never 0; if the gateway cannot be reached at
all, every reward of the batch is ``None`` and the error is logged. Each spec component's
mean is logged as the metric ``<name>/<component>``. The batch carries TRL's
``trainer_state.global_step`` (which TRL passes to reward functions) as its ``step``, so
that the gateway windows its audits and hack signatures by training step.

TRL's reward functions are described in its docs ("Using a custom reward function",
GRPOTrainer): ``f(prompts, completions, completion_ids, **columns) -> list[float | None]``;
an ``async def`` function runs on the trainer's event-loop thread (trl >= 0.2x, tested with
trl 1.16.0).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from tribunal.client import ClientError
from tribunal.integrations._gateway import gateway_access, score_on_gateway
from tribunal.integrations.rollouts import message_text, rewards_of, rollout_item, sub_reward_means

logger = logging.getLogger(__name__)

RewardFunc = Callable[..., Awaitable[list[float | None]]]

_TRAINER_KWARGS = frozenset(
    {"trainer_state", "log_extra", "log_metric", "environments", "completion_ids"}
)


def remote_reward(
    spec: str | None = None,
    *,
    verifier: str | None = None,
    url: str | None = None,
    columns: Mapping[str, str] | None = None,
    api_key: str | None = None,
    timeout_s: float = 600.0,
    max_retries: int = 6,
    name: str | None = None,
) -> RewardFunc:
    """Return an async TRL reward function scoring with a reward ``spec`` or a ``verifier``.

    Args:
        spec: A reward spec served by the gateway (``rloo_math``, ``tcr_agent`` ...).
        verifier: Or a verifier (``math``, ``code``, ``judge``, ``citation``) directly.
        url: The gateway (default ``TRIBUNAL_GATEWAY_URL``, else the local gateway on
            ``TRIBUNAL_GATEWAY_PORT``, else http://127.0.0.1:8100).
        columns: Dataset column -> rollout field renames (``{"answer": "ground_truth"}``).
        api_key: Bearer token (default ``TRIBUNAL_API_KEY``).
        timeout_s: Deadline of one batch.
        max_retries: Retries of a batch the gateway could not take (429, 503, no answer),
            with backoff; then every reward of the batch is None.
        name: The function's name in TRL's logs (default ``tribunal_<spec or verifier>``).

    Returns:
        ``async f(prompts, completions, **columns) -> list[float | None]``.

    Raises:
        ValueError: Not exactly one of ``spec`` and ``verifier``.
    """
    if (spec is None) == (verifier is None):
        raise ValueError("give exactly one of spec and verifier")
    base_url, key = gateway_access(url, api_key)
    return RemoteReward(
        target={"spec": spec} if spec is not None else {"verifier": str(verifier)},
        base_url=base_url,
        api_key=key,
        renames=dict(columns or {}),
        timeout_s=timeout_s,
        max_retries=max_retries,
        name=name or f"tribunal_{spec or verifier}",
    )


class RemoteReward:
    """The reward function :func:`remote_reward` returns: an instance of a module-level class
    with an async ``__call__`` (TRL's ``is_async_callable`` form) and plain attributes, so
    that it pickles: ``AsyncGRPOTrainer`` pickles its reward functions into the rollout
    worker it spawns, which a closure cannot survive. It holds no client: each call uses the
    running loop's (``tribunal.integrations._gateway.gateway_client``), so a copy unpickled in
    another process builds its own on first use. ``__name__`` is its name in TRL's logs."""

    def __init__(
        self,
        *,
        target: dict[str, str],
        base_url: str,
        api_key: str | None,
        renames: dict[str, str],
        timeout_s: float,
        max_retries: int,
        name: str,
    ) -> None:
        self.target = target
        self.base_url = base_url
        self.api_key = api_key
        self.renames = renames
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.__name__ = name

    async def __call__(
        self, prompts: list[Any], completions: list[Any], **kwargs: Any
    ) -> list[float | None]:
        """One request to the gateway for the batch; None for an item it could not score."""
        fields = {k: v for k, v in kwargs.items() if k not in _TRAINER_KWARGS}
        items = [
            rollout_item(
                index,
                self.target,
                message_text(completion, "assistant"),
                message_text(prompt, "user"),
                {self.renames.get(k, k): values[index] for k, values in fields.items()},
            )
            for index, (prompt, completion) in enumerate(zip(prompts, completions, strict=True))
        ]
        # TRL hands its TrainerState to reward functions: the batch goes at its global step.
        step = getattr(kwargs.get("trainer_state"), "global_step", None)
        try:
            results = await score_on_gateway(
                self.base_url,
                items,
                self.api_key,
                self.timeout_s,
                self.max_retries,
                step=step if isinstance(step, int) and not isinstance(step, bool) else None,
            )
        except ClientError as exc:
            logger.error(
                "%s: the gateway at %s failed: %s; rewards are None",
                self.__name__,
                self.base_url,
                exc,
            )
            return [None] * len(items)
        log_metric = kwargs.get("log_metric")
        if callable(log_metric):
            for component, mean in sub_reward_means(results).items():
                log_metric(f"{self.__name__}/{component}", mean)
        return rewards_of(results)
