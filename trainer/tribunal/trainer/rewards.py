"""Rewards over HTTP: one job per group, submitted the moment the group exists, collected with
long-poll, with a failure policy that never turns a failure into a silent 0.

The trainer never imports a verifier: every reward comes from a service speaking Tribunal's
jobs API (``POST /v1/jobs``, ``GET /v1/jobs/{id}?wait=``), or from the gateway's reward spec.

Failure classes: a *group failure* (the service cannot be reached, answers 5xx, or the group's
results are not back within ``timeout_s``, or an item comes back with a retryable error such as
``timeout`` or ``sandbox_error``) goes to the policy: ``drop_group`` (the group leaves the
loss), ``retry`` (resubmit up to ``retries`` times, ``retry_backoff_s`` apart and doubling,
then drop) or ``stop`` (raise
:class:`RewardFailure`). An item with a non-retryable error (``bad_input``) is *unscorable*:
its reward is NaN, it stays out of its group's baseline and gets advantage 0.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import math
import threading
from collections import Counter
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from tribunal.client import APIError, ItemResult, JobTimeout, TransportError, TribunalClient
from tribunal.trainer.config import FailurePolicy, GRPOConfig, RewardSourceConfig
from tribunal.trainer.rollout import RolloutGroup

logger = logging.getLogger(__name__)
T = TypeVar("T")


class RewardFailure(RuntimeError):
    """A group could not be scored; ``kind`` is its class (``transport``, ``timeout``,
    ``queue_full``, ``item_sandbox_error`` ...)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind


@dataclass(frozen=True)
class ItemReward:
    """One item's result: a reward, or None with an error code and its message;
    ``sub_rewards`` are a reward spec's components (the gateway's ``details.sub_rewards``,
    name -> reward or None)."""

    reward: float | None
    error: str | None = None
    retryable: bool = False
    message: str | None = None
    sub_rewards: dict[str, float | None] = field(default_factory=dict)


class RewardSource(Protocol):
    """Scores one group's items (``list[dict]``, the verifier's item fields)."""

    name: str
    weight: float
    timeout_s: float
    retries: int
    retry_backoff_s: float

    async def score(
        self,
        items: list[dict[str, Any]],
        key: str,
        step: int | None,
        policy_version: str | None = None,
    ) -> list[ItemReward]:
        """Return one :class:`ItemReward` per item, in order; ``step`` is the training step
        of the group (the gateway windows its audits and hack signatures by it), None for
        an evaluation; ``policy_version`` the policy that wrote it (recorded with its
        audits), None for an evaluation.

        Raises:
            RewardFailure: the service could not be reached or answered an error.
        """
        ...

    def build_items(self, group: RolloutGroup) -> list[dict[str, Any]]:
        """The items of ``group`` for this source."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


def _item_rewards(results: Sequence[ItemResult]) -> list[ItemReward]:
    out = []
    for result in results:
        if result.reward is None:
            error = result.error
            code = error.code if error else "no_reward"
            message = error.message if error else None
            out.append(ItemReward(None, code, bool(error and error.retryable), message))
        else:
            out.append(ItemReward(float(result.reward), sub_rewards=_sub_rewards(result)))
    return out


def _sub_rewards(result: ItemResult) -> dict[str, float | None]:
    """A spec result's component rewards by name (empty for a verifier's own result)."""
    subs = result.details.get("sub_rewards")
    if not isinstance(subs, dict):
        return {}
    return {
        str(name): None
        if not isinstance(sub, dict) or sub.get("reward") is None
        else float(sub["reward"])
        for name, sub in subs.items()
    }


class JobsRewardSource:
    """A verifier service (or the gateway's reward spec) reached through ``tribunal.client``.

    One job per group (``submit`` with an idempotency key of run, step, group and attempt,
    and, to the gateway, the group's training step), then long-poll (``wait``) until it is
    done.

    Args:
        config: the source's URL, verifier, weight, timeout and retries.
        client_retries: the client's own retries of one request (connection errors, 429/503
            with Retry-After) before the trainer's failure policy sees the failure.
    """

    def __init__(self, config: RewardSourceConfig, client_retries: int = 2) -> None:
        self.config = config
        self.name = config.name
        self.weight = config.weight
        self.timeout_s = config.timeout_s
        self.retries = config.retries
        self.retry_backoff_s = config.retry_backoff_s
        self._client = TribunalClient(
            config.url, max_concurrency=64, max_retries=client_retries, backoff_max_s=2.0
        )

    def build_items(self, group: RolloutGroup) -> list[dict[str, Any]]:
        """Items ``{id, group_id, response, <fields from the row>, <item_options>}``."""
        fields = {name: group.row[column] for name, column in self.config.fields.items()}
        return [
            {
                "id": f"{group.step}-{group.index}-{i}",
                "group_id": f"{group.step}-{group.index}",
                "response": completion.text,
                **fields,
                **self.config.item_options,
            }
            for i, completion in enumerate(group.completions)
        ]

    async def score(
        self,
        items: list[dict[str, Any]],
        key: str,
        step: int | None,
        policy_version: str | None = None,
    ) -> list[ItemReward]:
        """Submit the items as one job and long-poll its results. The gateway's job carries
        ``step`` and ``policy_version``: its audits and hack signatures are windowed by the
        trainer's steps, and each audit records the policy (a verifier's job has no such
        field; an evaluation sends neither).

        Raises:
            RewardFailure: ``transport`` (no answer), ``timeout`` (not done in
                ``timeout_s``), or the service's error code (``queue_full``, ``http_500``...).
        """
        gateway = self.config.verifier == "gateway"
        try:
            job_id = await self._client.submit(
                self.config.verifier,
                items,
                idempotency_key=key,
                step=step if gateway else None,
                policy_version=policy_version if gateway else None,
            )
            results = await self._client.wait(job_id, timeout_s=self.timeout_s)
        except JobTimeout as exc:
            raise RewardFailure("timeout", f"{self.name}: {exc}") from exc
        except TransportError as exc:
            raise RewardFailure("transport", f"{self.name}: {exc}") from exc
        except APIError as exc:
            raise RewardFailure(exc.code, f"{self.name}: {exc}") from exc
        return _item_rewards(results)

    async def aclose(self) -> None:
        """Close the client's connections."""
        await self._client.aclose()


@dataclass
class GroupScores:
    """The rewards of one group.

    Attributes:
        rewards: (G,) combined reward per completion, NaN where unscorable.
        components: per source name, (G,) that source's rewards (NaN where unscorable); and
            per ``<source>/<component>`` of a reward spec, (G,) that component's rewards
            (NaN where it has none), present only for a source that was scored.
        item_errors: item error codes counted.
        failures: group failure classes counted (one per failed attempt).
        retries: resubmissions made.
        dropped: the group leaves the loss (its scoring failed under ``drop_group``/``retry``).
    """

    rewards: list[float]
    components: dict[str, list[float]] = field(default_factory=dict)
    item_errors: Counter[str] = field(default_factory=Counter)
    failures: Counter[str] = field(default_factory=Counter)
    retries: int = 0
    dropped: bool = False


async def _score_source(
    source: RewardSource,
    group: RolloutGroup,
    key: str,
    policy: FailurePolicy,
    step: int | None,
    policy_version: str | None,
) -> tuple[list[ItemReward] | None, Counter[str], Counter[str], int]:
    """One source's results for a group, under the policy: (results or None if failed,
    item errors, failures, retries)."""
    items = source.build_items(group)
    failures: Counter[str] = Counter()
    item_errors: Counter[str] = Counter()
    cause = ""  # the last failure's words, which a stopped run ends with
    attempts = 1 + (source.retries if policy == "retry" else 0)
    for attempt in range(attempts):
        if attempt:
            await asyncio.sleep(source.retry_backoff_s * 2 ** (attempt - 1))
        try:
            results = await asyncio.wait_for(
                source.score(items, f"{key}-{source.name}-a{attempt}", step, policy_version),
                source.timeout_s,
            )
        except (TimeoutError, RewardFailure) as exc:
            kind = exc.kind if isinstance(exc, RewardFailure) else "timeout"
            failures[kind] += 1
            cause = str(exc) if str(exc) else f"{kind}: no results in {source.timeout_s} s"
            logger.warning("group %s, source %s: %s", key, source.name, cause)
            continue
        item_errors.update(r.error for r in results if r.error)
        retryable = [r for r in results if r.error and r.retryable]
        if retryable:
            failures[f"item_{retryable[0].error}"] += 1
            cause = f"item_{retryable[0].error}: {retryable[0].message}"
            logger.warning("group %s, source %s: %s", key, source.name, cause)
            continue
        return list(results), item_errors, failures, attempt
    if policy == "stop":
        kind = next(iter(failures))
        raise RewardFailure(kind, f"group {key}, source {source.name}; last failure: {cause}")
    return None, item_errors, failures, attempts - 1


async def score_group(
    sources: Sequence[RewardSource],
    group: RolloutGroup,
    key: str,
    policy: FailurePolicy,
    *,
    step: int | None = None,
    policy_version: str | None = None,
) -> GroupScores:
    """Score one group with every source concurrently and combine: Σ weight · reward.

    A completion unscorable by any source is NaN; a source that failed drops the group.
    ``step`` is the training step sent with the group (``RewardScheduler`` sends its
    ``group.step``); None, an evaluation's, keeps it out of training's windows.
    ``policy_version`` names the policy that wrote the group (``RewardScheduler``:
    ``<run_id>@<step>``), recorded with its audits.

    Raises:
        RewardFailure: the policy is ``stop`` and a source failed.
    """
    outcomes = await asyncio.gather(
        *(_score_source(s, group, key, policy, step, policy_version) for s in sources)
    )
    size = len(group.completions)
    scores = GroupScores(rewards=[0.0] * size)
    for source, (results, item_errors, failures, retries) in zip(sources, outcomes, strict=True):
        scores.item_errors.update(item_errors)
        scores.failures.update(failures)
        scores.retries += retries
        scores.dropped |= results is None
        rewards = [math.nan] * size if results is None else [_nan(r.reward) for r in results]
        scores.components[source.name] = rewards
        for sub in dict.fromkeys(name for r in results or () for name in r.sub_rewards):
            scores.components[f"{source.name}/{sub}"] = [
                _nan(r.sub_rewards.get(sub)) for r in results or ()
            ]
        scores.rewards = [
            total + source.weight * r for total, r in zip(scores.rewards, rewards, strict=True)
        ]
    return scores


def _nan(value: float | None) -> float:
    return math.nan if value is None else value


class RewardScheduler:
    """Runs the reward sources on an event loop of their own, in a background thread, so the
    training thread can hand over groups while it generates.

    Args:
        sources: the reward sources.
        policy: the failure policy.
        run_id: prefix of idempotency keys (unique per run, stable across a resume).
    """

    def __init__(self, sources: Sequence[RewardSource], policy: FailurePolicy, run_id: str):
        self.sources = list(sources)
        self.policy = policy
        self.run_id = run_id
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    def submit(self, group: RolloutGroup) -> concurrent.futures.Future[GroupScores]:
        """Start scoring ``group`` now; the future holds its :class:`GroupScores`."""
        key = f"{self.run_id}-s{group.step}-g{group.index}"
        # On-policy: the group was written by the policy of its step, in this run.
        version = f"{self.run_id}@{group.step}"
        return self._run(
            score_group(
                self.sources, group, key, self.policy, step=group.step, policy_version=version
            )
        )

    def _run(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def close(self) -> None:
        """Cancel scoring still in flight (a stopped run), close the sources, stop the loop."""

        async def close_all() -> None:
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)
            for source in self.sources:
                await source.aclose()

        self._run(close_all()).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


def build_sources(config: GRPOConfig) -> list[RewardSource]:
    """The reward sources a config names: the list form, or the gateway's reward spec (jobs
    of the gateway's own verifier, ``"verifier": "gateway"``, each item naming the ``spec``)."""
    if config.gateway_url is not None and config.reward_spec is not None:
        gateway = RewardSourceConfig(
            name=config.reward_spec,
            url=config.gateway_url,
            verifier="gateway",
            fields=dict(config.reward_spec_fields),
            item_options={"spec": config.reward_spec},
        )
        return [JobsRewardSource(gateway)]
    return [JobsRewardSource(source) for source in config.reward_sources]
