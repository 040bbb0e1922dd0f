"""verl's custom reward function, scored on the gateway.

In a verl config::

    custom_reward_function:
      path: /path/to/site-packages/tribunal/integrations/verl.py   # or a copy of this file
      name: compute_score            # naive reward manager: one sample per call
      reward_kwargs: {spec: tcr_agent, url: "http://127.0.0.1:8100"}

or ``name: compute_score_batch`` with ``reward_model.reward_manager=batch`` (one request per
batch). ``solution_str`` is the rollout's ``response``; ``ground_truth`` its ``ground_truth``
(a dict is merged into the rollout instead); ``extra_info`` (a dict: ``num_turns``,
``tests``, ``positive_rubrics`` ...) is merged into the rollout. The result is verl's dict
form: ``{"score": reward, <component>: sub-reward, ...}``, sub-rewards NaN where a component
was not computed (verl logs them; ``score`` alone is the reward).

verl has no value for "missing": an item the gateway could not score raises
:class:`RewardUnavailable` (training stops with the reason) rather than returning a number.
Some verl reward managers catch exceptions and substitute 0.0; prefer those that do not.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Sequence
from typing import Any

from tribunal.core.envelope import ItemResult
from tribunal.integrations._gateway import gateway_access, score_on_gateway
from tribunal.integrations.rollouts import rollout_item


class RewardUnavailable(RuntimeError):
    """The gateway could not score an item (its error class and message are in the text)."""


def _plain(value: Any) -> Any:
    """JSON-ready: verl hands over numpy scalars and arrays (``np.int64`` turns, object
    arrays of strings), which JSON cannot encode."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist") and not isinstance(value, str | bytes):
        return _plain(value.tolist())  # numpy scalar (-> Python scalar) or array (-> list)
    return value


def _fields(ground_truth: Any, extra_info: Any) -> dict[str, Any]:
    truth, info = _plain(ground_truth), _plain(extra_info)
    fields: dict[str, Any] = dict(truth) if isinstance(truth, dict) else {}
    if truth is not None and not isinstance(truth, dict):
        fields["ground_truth"] = str(truth)
    if isinstance(info, dict):
        fields.update(info)
    return fields


def _verl_score(result: ItemResult) -> dict[str, Any]:
    if result.error is not None or result.reward is None:
        code = result.error.code if result.error else "internal_error"
        message = result.error.message if result.error else "no reward"
        raise RewardUnavailable(f"item {result.id}: {code}: {message}")
    out: dict[str, Any] = {"score": result.reward}
    for name, sub in result.details.get("sub_rewards", {}).items():
        reward = sub.get("reward")
        out[name] = float(reward) if isinstance(reward, int | float) else math.nan
    return out


def compute_score_batch(
    data_sources: Sequence[Any],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Any] | None = None,
    *,
    spec: str | None = None,
    url: str | None = None,
    api_key: str | None = None,
    timeout_s: float = 600.0,
    **_: Any,
) -> list[dict[str, Any]]:
    """Score a batch in one request; verl's batched signature.

    Args:
        data_sources: verl's ``data_source`` per sample (kept in the rollout as ``data_source``).
        solution_strs: The decoded responses.
        ground_truths: ``reward_model.ground_truth`` per sample.
        extra_infos: ``extra_info`` per sample (dicts or None).
        spec: Reward spec (default ``TRIBUNAL_SPEC`` or ``rloo_math``).
        url: The gateway (default ``TRIBUNAL_GATEWAY_URL`` or http://127.0.0.1:8100).
        api_key: Bearer token (default ``TRIBUNAL_API_KEY``).
        timeout_s: Deadline of the request.

    Returns:
        One ``{"score": reward, <component>: sub-reward}`` per sample.

    Raises:
        RewardUnavailable: Some item could not be scored.
        tribunal.client.ClientError: The gateway cannot be reached or refused the batch.
    """
    name = spec or os.environ.get("TRIBUNAL_SPEC", "rloo_math")
    infos = list(extra_infos) if extra_infos is not None else [None] * len(solution_strs)
    items = [
        rollout_item(
            index,
            {"spec": name},
            solution,
            None,
            {"data_source": str(source), **_fields(truth, info)},
        )
        for index, (source, solution, truth, info) in enumerate(
            zip(data_sources, solution_strs, ground_truths, infos, strict=True)
        )
    ]
    base_url, key = gateway_access(url, api_key)
    results = asyncio.run(score_on_gateway(base_url, items, key, timeout_s))
    return [_verl_score(result) for result in results]


def compute_score(
    data_source: Any,
    solution_str: str,
    ground_truth: Any,
    extra_info: Any = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """Score one sample; verl's ``compute_score(data_source, solution_str, ground_truth,
    extra_info)``. Keyword arguments are those of :func:`compute_score_batch`."""
    [score] = compute_score_batch(
        [data_source], [solution_str], [ground_truth], [extra_info], **kwargs
    )
    return score
