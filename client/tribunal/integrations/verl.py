"""verl's custom reward function, scored on the gateway.

verl ≥ 0.9 reads the function from ``reward.custom_reward_function`` (the top-level
``custom_reward_function`` of older configs is ignored by ``main_ppo``; only the fully-async
entry point still moves it under ``reward``), and ``reward_kwargs`` is not in verl's schema, so
it is added with ``+``::

    reward.custom_reward_function.path=/path/to/site-packages/tribunal/integrations/verl.py
    reward.custom_reward_function.name=compute_score
    +reward.custom_reward_function.reward_kwargs.url=http://127.0.0.1:8100

``compute_score`` is ``async def``: verl 0.9's reward loop awaits it, one request per sample,
the samples of a worker concurrently, on one connection pool per event loop (up to 64 requests
in flight, ``tribunal.integrations._gateway``). ``compute_score_sync`` is the same for older
verl and its legacy ``workers/reward_manager`` (which call it from threads), and
``compute_score_batch`` for the legacy ``batch`` manager (one request per batch), and
``compute_score_prime`` (the reward as a float) for the legacy ``prime`` manager.
docs/integrations.md has the function for each of verl's managers.

What is scored:

- without a spec (no ``spec`` in ``reward_kwargs``, no ``TRIBUNAL_SPEC``), verl's
  ``data_source`` picks the verifier as verl's own ``default_compute_score`` does: GSM8K, MATH,
  DAPO-math, AIME and NuminaMath sources go to the math verifier with ``ground_truth``;
  ``codecontests``, ``apps``, ``codeforces`` and ``taco`` to the code verifier, the program being
  the response's last fenced block, the tests its ``ground_truth`` (below). Any other source
  is refused by name (``ValueError``), not scored by a guess.
- with a spec, every sample is a rollout for it: the response, ``ground_truth`` (a dict is
  merged into the rollout) and ``extra_info``'s entries (``num_turns`` ...) as rollout fields.
  Its ``trainer_step`` is ``extra_info["max_global_steps"]`` when verl's reward loop passes
  one: verl 0.9's rollout servers stamp each output with the global step of the weights that
  wrote it (``min_global_steps`` / ``max_global_steps`` in the agent loop's extra fields,
  which the reward loop merges into ``extra_info``), so the gateway windows its audits and
  hack signatures by the policy's step; without it (an older verl, a server that was never
  sent weights) by time.

A code ``ground_truth`` is verl's ``{"inputs": [stdin, ...], "outputs": [stdout, ...]}``, as a
dict or its JSON string; it becomes stdio tests (``tests`` of the rollout). Call-based tests
(``fn_name``) are refused: a program's return value is not its stdout.

The result is verl's dict form, the same keys for every sample of a run (verl's reward loop
takes the keys of a batch's first sample for all): ``{"score": reward, <component>: ...}``
with a spec's components, or ``{"score", "math", "code"}`` without one; NaN where a component
or verifier did not score the sample (verl logs them; ``score`` alone is the reward).

verl has no value for "missing". With a spec, a sample that failed (a bad label, a
component's bad input, a timeout the spec does not turn into its ``undecided_reward``) gets the
reward the spec pays a failed item, which the gateway reports in the result
(``details.failed_reward``: the spec's ``failed_reward``, else its ``undecided_reward``; as
OpenRLHF's and slime's routes pay it): the other samples of the batch are scored as usual, the
result has ``failed`` 1.0 (0.0 for every other sample; verl logs it beside the components),
and the failure is logged here (logger ``tribunal.integrations.verl``, a warning naming the
sample, its error class and field). What still raises :class:`RewardUnavailable` (verl's
reward loop stops training with the reason): a failed sample under a spec that sets neither
value (the message says so), an error of the infrastructure (a verifier down or full: the
message names ``backend_unavailable`` or ``queue_full``), and, without a spec, any sample a
verifier refused or could not score (a verifier item has no failed reward). A gateway that
cannot be reached raises ``tribunal.client.ClientError`` after the client's retries.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

from tribunal.integrations._gateway import gateway_access, run_sync, score_on_gateway
from tribunal.integrations.rollouts import (
    RewardUnavailable,
    failure_text,
    require_reward,
    rollout_item,
)
from tribunal.wire.envelope import ItemResult
from tribunal.wire.errors import INFRASTRUCTURE_CODES

logger = logging.getLogger(__name__)

__all__ = [
    "RewardUnavailable",
    "compute_score",
    "compute_score_batch",
    "compute_score_batch_async",
    "compute_score_sync",
    "stdio_tests",
]

MATH_SOURCES = frozenset(
    {
        "openai/gsm8k",
        "lighteval/MATH",
        "DigitalLearningGmbH/MATH-lighteval",
        "HuggingFaceH4/MATH-500",
        "math_dapo",
        "math",
        "math_dapo_reasoning",
        "numina_aops_forum",
        "numina_synthetic_math",
        "numina_amc_aime",
        "numina_synthetic_amc",
        "numina_cn_k12",
        "numina_olympiads",
    }
)
"""verl 0.9.1's math ``data_source`` names (``verl.utils.reward_score.default_compute_score``;
there also every name starting with ``aime``)."""

CODE_SOURCES = frozenset({"codecontests", "apps", "codeforces", "taco"})
"""verl 0.9.1's code ``data_source`` names (stdio tests in ``ground_truth``)."""

ROUTED_KEYS = ("math", "code")
"""The component keys of a result without a spec: the verifier that scored it."""

_VERL_KWARGS = frozenset({"reward_router_address", "reward_model_tokenizer"})
"""Keywords verl itself adds when a reward model is enabled; not Tribunal's to read."""


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


def stdio_tests(ground_truth: Any) -> dict[str, Any] | None:
    """verl's code ``ground_truth`` as the code verifier's stdio tests, or None when it is not
    one (``{"inputs": [...], "outputs": [...]}``, a dict or its JSON string).

    Raises:
        ValueError: It has verl's code shape but cannot be run as stdio cases (call-based
            ``fn_name``, lists of different lengths, a case that is not a string), naming
            the field.
    """
    truth = _plain(ground_truth)
    if isinstance(truth, str) and truth.lstrip().startswith("{"):
        try:
            truth = json.loads(truth)
        except json.JSONDecodeError:
            return None
    if not isinstance(truth, dict) or not {"inputs", "outputs"} <= truth.keys():
        return None
    if truth.get("fn_name"):
        raise ValueError(
            f"ground_truth.fn_name={truth['fn_name']!r}: call-based tests are not run "
            "(stdio only); give Tribunal's function tests as extra_info.tests instead"
        )
    inputs, outputs = truth["inputs"], truth["outputs"]
    if not isinstance(inputs, list) or not isinstance(outputs, list) or not inputs:
        raise ValueError("ground_truth.inputs and .outputs: non-empty lists expected")
    if len(inputs) != len(outputs):
        raise ValueError(
            f"ground_truth: {len(inputs)} inputs but {len(outputs)} outputs (one each per case)"
        )
    for name, values in (("inputs", inputs), ("outputs", outputs)):
        for index, value in enumerate(values):
            if not isinstance(value, str):
                raise ValueError(
                    f"ground_truth.{name}.{index}: a string expected, got {type(value).__name__}"
                )
    return {
        "kind": "stdio",
        "cases": [{"stdin": i, "stdout": o} for i, o in zip(inputs, outputs, strict=True)],
    }


def _spec_fields(ground_truth: Any, extra_info: Any) -> dict[str, Any]:
    """Rollout fields: ``extra_info``'s, then those of ``ground_truth`` over them. verl's naive
    manager merges the agent loop's ``tool_extra_fields`` into ``extra_info``, and a tool's
    output is the policy's to shape: it must not replace the answer or the tests."""
    truth, info = _plain(ground_truth), _plain(extra_info)
    fields: dict[str, Any] = dict(info) if isinstance(info, dict) else {}
    tests = stdio_tests(truth)
    if tests is not None:
        fields["tests"] = tests
    elif isinstance(truth, dict):
        fields.update(truth)
    elif truth is not None:
        fields["ground_truth"] = str(truth)
    return fields


def _routed_item(
    index: int, data_source: str, solution: str, truth: Any, info: Any
) -> dict[str, Any]:
    """A verifier item chosen by ``data_source``, with only that verifier's fields."""
    info = _plain(info) if isinstance(_plain(info), dict) else {}
    if data_source in MATH_SOURCES or data_source.startswith("aime"):
        truth = _plain(truth)
        return {
            "id": str(index),
            "verifier": "math",
            "response": solution,
            **({"ground_truth": str(truth)} if truth is not None else {}),
        }
    if data_source in CODE_SOURCES:
        # ground_truth's tests first: extra_info may hold what a tool wrote (_spec_fields).
        tests = stdio_tests(truth) or info.get("tests")
        if tests is None:
            raise ValueError(
                f"ground_truth of data_source {data_source!r}: verl's "
                '{"inputs": [...], "outputs": [...]} (or its JSON string) expected'
            )
        return {
            "id": str(index),
            "verifier": "code",
            "response": solution,
            "language": info.get("language", "python"),
            "tests": tests,
        }
    raise ValueError(
        f"data_source {data_source!r} names no verifier: math sources are "
        f"{', '.join(sorted(MATH_SOURCES))} and aime*, code sources "
        f"{', '.join(sorted(CODE_SOURCES))}; for another, set reward_kwargs.spec (or TRIBUNAL_SPEC)"
    )


def _failed_reward(result: ItemResult, spec: str, item: Mapping[str, Any]) -> float:
    """The reward the spec pays ``result``, a sample that failed (``details.failed_reward``),
    logged with the sample's ``data_source`` and the start of its response (``item``: what was
    sent; verl's reward loop sends one sample a request, so the item's id is always 0).

    Raises:
        RewardUnavailable: The gateway reports none: an error of the infrastructure (retry),
            or a spec that sets neither ``failed_reward`` nor ``undecided_reward`` (said).
    """
    paid = result.details.get("failed_reward")
    error = result.error
    if error is None or isinstance(paid, bool) or not isinstance(paid, int | float):
        reason = failure_text(result)
        ours = "spec" in result.details  # not an item the gateway could not read as a rollout
        if ours and error is not None and error.code not in INFRASTRUCTURE_CODES:
            reason += (
                f"; spec {spec} pays no reward for a failed sample (it sets neither "
                "failed_reward nor undecided_reward) and verl cannot carry a missing one: set "
                "failed_reward in the spec (its lowest reward)"
            )
        raise RewardUnavailable(reason)
    logger.warning(
        "verl sample of %s (response %r) failed (%s%s), given spec %s's failed reward %g: %s",
        item.get("data_source"),
        str(item.get("response", ""))[:60],
        error.code,
        f", field {error.field}" if error.field else "",
        spec,
        paid,
        error.message,
    )
    return float(paid)


def _verl_score(result: ItemResult, spec: str | None, item: Mapping[str, Any]) -> dict[str, Any]:
    if spec is None:
        out: dict[str, Any] = {"score": require_reward(result)}
        for key in ROUTED_KEYS:
            out[key] = result.reward if result.verifier.name == key else math.nan
        return out
    failed = result.error is not None or result.reward is None
    reward = _failed_reward(result, spec, item) if failed else result.reward
    out = {"score": reward}
    for name, sub in result.details.get("sub_rewards", {}).items():
        value = sub.get("reward")
        out[name] = float(value) if isinstance(value, int | float) and not failed else math.nan
    out["failed"] = 1.0 if failed else 0.0
    return out


def _items(
    spec: str | None,
    data_sources: Sequence[Any],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Any] | None,
) -> list[dict[str, Any]]:
    infos = list(extra_infos) if extra_infos is not None else [None] * len(solution_strs)
    rows = zip(data_sources, solution_strs, ground_truths, infos, strict=True)
    if spec is None:
        return [
            _routed_item(index, str(_plain(source)), solution, truth, info)
            for index, (source, solution, truth, info) in enumerate(rows)
        ]
    return [
        _at_policy_step(
            rollout_item(
                index,
                {"spec": spec},
                solution,
                None,
                {"data_source": str(_plain(source)), **_spec_fields(truth, info)},
            )
        )
        for index, (source, solution, truth, info) in enumerate(rows)
    ]


def _at_policy_step(item: dict[str, Any]) -> dict[str, Any]:
    """``item`` with ``trainer_step``: the global step of the weights that wrote the sample's
    last tokens (``extra_info["max_global_steps"]``, a rollout field by then: verl 0.9's
    async rollout servers), when verl passed one that is an integer >= 0."""
    step = item.get("max_global_steps")
    if isinstance(step, int) and not isinstance(step, bool) and step >= 0:
        item["trainer_step"] = step
    return item


def _check_kwargs(extra: Mapping[str, Any]) -> None:
    unknown = sorted(set(extra) - _VERL_KWARGS)
    if unknown:
        raise TypeError(
            f"unknown reward_kwargs {', '.join(unknown)}: Tribunal's are spec, url, api_key, "
            "timeout_s"
        )


async def compute_score_batch_async(
    data_sources: Sequence[Any],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Any] | None = None,
    *,
    spec: str | None = None,
    url: str | None = None,
    api_key: str | None = None,
    timeout_s: float = 600.0,
    **verl_kwargs: Any,
) -> list[dict[str, Any]]:
    """Score a batch in one request to the gateway.

    Args:
        data_sources: verl's ``data_source`` per sample (routes a sample without a spec; kept in
            a spec's rollout as ``data_source``).
        solution_strs: The decoded responses.
        ground_truths: ``reward_model.ground_truth`` per sample.
        extra_infos: ``extra_info`` per sample (dicts or None).
        spec: Reward spec for every sample (default ``TRIBUNAL_SPEC``; neither: route by
            ``data_source``).
        url: The gateway (default ``TRIBUNAL_GATEWAY_URL``, else the local gateway on
            ``TRIBUNAL_GATEWAY_PORT``, else http://127.0.0.1:8100).
        api_key: Bearer token (default ``TRIBUNAL_API_KEY``).
        timeout_s: Deadline of the request.
        verl_kwargs: What verl adds with a reward model (``reward_router_address``,
            ``reward_model_tokenizer``), ignored.

    Returns:
        One ``{"score": reward, <component>: sub-reward, "failed": 0.0 | 1.0}`` per sample
        with a spec (a failed sample's ``score`` is the spec's failed reward), one
        ``{"score", "math", "code"}`` without (module docstring).

    Raises:
        ValueError: A sample's ``data_source`` or ``ground_truth`` cannot be scored (named).
        TypeError: An unknown keyword (a misspelt ``reward_kwargs`` entry).
        RewardUnavailable: Some item could not be scored and has no failed reward: without a
            spec, under a spec that sets none, or for an error of the infrastructure.
        tribunal.client.ClientError: The gateway cannot be reached or refused the batch.
    """
    _check_kwargs(verl_kwargs)
    name = spec or os.environ.get("TRIBUNAL_SPEC") or None
    items = _items(name, data_sources, solution_strs, ground_truths, extra_infos)
    base_url, key = gateway_access(url, api_key)
    results = await score_on_gateway(base_url, items, key, timeout_s)
    return [_verl_score(result, name, item) for result, item in zip(results, items, strict=True)]


def compute_score_batch(
    data_sources: Sequence[Any],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Any] | None = None,
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """:func:`compute_score_batch_async` for verl's legacy ``batch`` reward manager, which calls
    it from a thread without an event loop (run on that thread's own loop, kept between calls
    with its gateway client)."""
    return run_sync(
        compute_score_batch_async(data_sources, solution_strs, ground_truths, extra_infos, **kwargs)
    )


async def compute_score(
    data_source: Any,
    solution_str: str,
    ground_truth: Any,
    extra_info: Any = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """Score one sample; verl ≥ 0.9's awaited ``compute_score(data_source, solution_str,
    ground_truth, extra_info)``. Keyword arguments and errors are those of
    :func:`compute_score_batch_async`."""
    [score] = await compute_score_batch_async(
        [data_source], [solution_str], [ground_truth], [extra_info], **kwargs
    )
    return score


def compute_score_sync(
    data_source: Any,
    solution_str: str,
    ground_truth: Any,
    extra_info: Any = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """:func:`compute_score` for older verl and its legacy reward managers, which call it
    synchronously from threads (on the thread's own event loop, kept between calls with its
    gateway client)."""
    return run_sync(compute_score(data_source, solution_str, ground_truth, extra_info, **kwargs))


def compute_score_prime(
    data_source: Any,
    solution_str: str,
    ground_truth: Any,
    extra_info: Any = None,
    **kwargs: Any,
) -> float:
    """:func:`compute_score_sync`'s ``score`` alone, for verl's legacy ``prime`` reward manager.

    That manager reads a float result as the reward and any other at ``result[0]``: the dict of
    :func:`compute_score_sync` raises a ``KeyError`` there, which it catches, setting every
    reward of the batch to 0.0 with one printed line. It calls this function in a process pool
    (so it must be a plain function: the async :func:`compute_score` returns a coroutine, which
    cannot be pickled back). It turns any exception into 0.0 as well, so a sample the gateway
    could not score and that has no failed reward (:class:`RewardUnavailable`) is paid 0.0
    there: prime has no other value. A failed sample under a spec with a failed reward is paid
    that, as with the other managers.

    Returns:
        The reward, a float.

    Raises:
        The errors of :func:`compute_score_batch_async`.
    """
    score = compute_score_sync(data_source, solution_str, ground_truth, extra_info, **kwargs)
    return float(score["score"])
