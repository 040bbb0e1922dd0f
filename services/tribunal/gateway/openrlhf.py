"""OpenRLHF's remote reward protocol (``--reward.remote_url``), spoken by the gateway.

OpenRLHF 0.11's rollout workers post one sample per request,
``{"query": [q], "prompts": [p], "labels": [l]}`` (``q`` is prompt + response decoded with
``skip_special_tokens=False``; ``l`` comes from ``--data.label_key``), and read ``rewards``,
``scores`` and ``extra_logs`` from the answer: ``SingleTurnAgentExecutor`` in
``openrlhf/utils/agent.py`` (0.11.2). Its dynamic filtering keeps a prompt's group only when
the mean of its ``scores`` lies strictly inside ``--algo.dynamic_filtering_range`` (default
(0, 1)): ``scores`` is the spec's ``score`` (:func:`to_response`), not the reward. On a
non-2xx answer it tries 5 times, 1 s apart, then logs the error at INFO and leaves the
sample's reward ``None``.

Here each query becomes one rollout for a reward spec: ``response`` is the query with its
prompt removed, ``question`` the prompt, and the label the ``ground_truth``; a label that is
a JSON object is merged into the rollout instead (so a refiner rollout can carry its
rubrics and evidence, or the trainer's ``num_turns``: ``{"positive_rubrics": [...],
"evidence": {...}}``).

The response's end-of-sequence and padding tokens (:data:`END_TOKENS`, plus those of the
setting ``TRIBUNAL_GATEWAY_OPENRLHF_END_TOKENS`` and the request's ``end_tokens``) are taken
off its end before scoring.

The prompt is located as the trainer builds the query (:func:`locate_response`): padding
and special tokens that decoding leaves at the start (``<|endoftext|>``, ``<pad>``, BOS) and
whitespace are skipped on both sides. A prompt longer than ``max_len - max_new_tokens``
tokens is truncated by OpenRLHF to its last tokens before generation, while ``prompts`` still
holds all of it: a query that starts with a suffix of its prompt (of at least
:data:`MIN_TRUNCATED_PROMPT_CHARS` characters; :func:`locate_truncated_response`) is scored
from the end of that suffix, and the route counts it. A request without ``prompts`` or
``labels`` is refused (422 naming the field): that is the request's shape, not an item's.

Every item is answered, whatever happened to the others (a batch with one bad item scores the
rest). OpenRLHF turns ``rewards`` into a tensor and so cannot carry a missing reward, and on
an HTTP error it keeps the sample with a reward of ``None``, which fails the training step
later, far from the cause. So an item that failed gets the spec's failed reward
(:func:`failed_reward`: ``failed_reward``, else ``undecided_reward``; the spec's lowest
reward, so that no failure is paid more than an answer), a score of 0, a 1 in
``extra_logs.failed``, and an entry in the answer's ``errors`` (its index in the request, the
error's code, field and message); the route logs and counts it. Failures of that kind: a
null or empty label (``labels.<i>``: scored against nothing, a verifier would pay 0 for a
right answer), a query whose prompt cannot be located either way (``query.<i>``: scored
whole, the question's own numbers would pay a response that has none), an item error of the
spec (a component's bad input, a ``score`` formula that cannot be computed for the item's
values). OpenRLHF reads ``rewards``, ``scores`` and ``extra_logs`` and nothing else, so
``errors`` reaches the gateway's log and a client that reads it, not OpenRLHF.

A component the verifiers could not decide (``timeout``, ``internal_error``: a power tower,
a huge factorial) takes the spec's ``undecided_reward`` in place of its own value, and the
other components still apply (``tribunal.gateway.scorer``: an overlong penalty is not
escaped by an answer sympy cannot finish); such an item gets a score of 0 and a 1 in
``extra_logs.undecided``. Only the infrastructure's own failures, which no item causes and a
retry may cure (:data:`RETRIED`: a verifier down or full), refuse the request with their
class and status (retryable), as a full queue does.

``extra_logs`` holds the same keys for every item of a spec (each component, ``undecided``
and ``failed``; 0 for a component without a value: skipped by a gate, or the item failed):
OpenRLHF concatenates the samples' logs key by key, and a key one sample lacks makes
``split_experience_batch`` refuse the batch (``Size of info[...] does not match``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tribunal.gateway.expression import Formula, FormulaError
from tribunal.gateway.scorer import DROPPABLE
from tribunal.gateway.specs import RewardSpec
from tribunal.wire.envelope import ItemError, ItemResult
from tribunal.wire.errors import ERRORS_BY_CODE, BadInput, ConfigurationError, TribunalError

MIN_TRUNCATED_PROMPT_CHARS = 32
"""The shortest prompt suffix a truncated query must start with: a shorter one (a template's
last line) could start an unrelated query by chance."""

_SCORED_PREFIX = re.compile(r"^items\.\d+\.?")

RETRIED = DROPPABLE
"""Item error classes that refuse the whole request (retryable) instead of failing the item:
the infrastructure's (a verifier down, a queue full), which no item causes and a retry may
cure (``tribunal.gateway.scorer.DROPPABLE``)."""
# What decoding may leave around a prompt: whitespace, padding, BOS / EOS tokens.
_PADDING = re.compile(
    r"(?:\s|<\|endoftext\|>|<\|pad\|>|<pad>|\[PAD\]|<\|finetune_right_pad_id\|>"
    r"|<\|end_of_text\|>|<\|begin_of_text\|>|</?s>|<bos>|<eos>|<｜begin▁of▁sentence｜>)*"
)


END_TOKENS = (
    "<|im_end|>",
    "<|endoftext|>",
    "</s>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|end_of_text|>",
    "<end_of_turn>",
    "<eos>",
    "<|end|>",
    "<|return|>",
    "<｜end▁of▁sentence｜>",
    "<|pad|>",
    "<pad>",
    "[PAD]",
    "<|finetune_right_pad_id|>",
)
"""End-of-sequence and padding tokens of the common chat templates (ChatML and Qwen, Llama 2
and 3, Gemma, Phi, gpt-oss, DeepSeek), which OpenRLHF leaves at the end of a query: it decodes
prompt and response with ``skip_special_tokens=False``, so a finished sequence ends in its EOS
and a ``#### 18<|im_end|>`` would be read as the answer ``18<|im_end|>``."""


def strip_end_tokens(response: str, extra: tuple[str, ...] = ()) -> str:
    """``response`` without the end-of-sequence and padding tokens (:data:`END_TOKENS` and
    ``extra``) and whitespace at its end, however many and in whatever order."""
    tokens = tuple(t for t in (*END_TOKENS, *extra) if t)
    end = len(response.rstrip())
    stripped = True
    while stripped:
        stripped = False
        for token in tokens:
            if response.endswith(token, 0, end):
                end = len(response[: end - len(token)].rstrip())
                stripped = True
    return response[:end]


class GetRewardRequest(BaseModel):
    """``POST /get_reward``: OpenRLHF's request body."""

    model_config = ConfigDict(extra="ignore")

    query: list[str] = Field(min_length=1, description="Prompt + response, templated.")
    prompts: list[str] | None = Field(default=None, description="The prompts, templated.")
    labels: list[Any] | None = Field(
        default=None, description="Ground truths (or JSON objects of rollout fields)."
    )
    end_tokens: list[str] = Field(
        default_factory=list,
        description="More end-of-sequence or padding tokens to take off each response's end.",
    )

    @model_validator(mode="after")
    def _same_lengths(self) -> GetRewardRequest:
        for name in ("prompts", "labels"):
            value = getattr(self, name)
            if value is not None and len(value) != len(self.query):
                raise ValueError(f"{name}: {len(value)} entries for {len(self.query)} queries")
        return self


class FailedItem(ItemError):
    """An item a trainer route answered with its spec's failed reward, and why."""

    index: int = Field(ge=0, description="The item's position in the request (`query.<index>`).")


class GetRewardResponse(BaseModel):
    """What OpenRLHF reads: ``rewards`` (advantages), ``scores`` (dynamic filtering: each in
    [0, 1], the spec's ``score``) and ``extra_logs`` (logged per sample: each spec component's
    reward, ``undecided`` and ``failed``); and what it does not read: ``errors``, the items
    that failed."""

    rewards: list[float]
    scores: list[float]
    extra_logs: dict[str, list[float]]
    errors: list[FailedItem] = Field(
        default_factory=list,
        description="The items that failed, in request order: each was given the spec's "
        "failed reward (`failed_reward`, else `undecided_reward`), a score of 0 and a 1 in "
        "`extra_logs.failed`.",
    )


def rollout_fields(label: Any) -> dict[str, Any]:
    """A label as rollout fields: a JSON object (or its text) merged in, else the
    ``ground_truth``."""
    if isinstance(label, dict):
        return label
    if isinstance(label, str) and label.lstrip().startswith("{"):
        try:
            parsed = json.loads(label)
        except json.JSONDecodeError:
            return {"ground_truth": label}
        if isinstance(parsed, dict):
            return parsed
    return {"ground_truth": label if isinstance(label, str) else json.dumps(label)}


def locate_response(query: str, prompt: str) -> str | None:
    """Return what follows ``prompt`` in ``query``, or None when the prompt is not there.

    Padding and special tokens (see the module docstring) at the start of either are
    skipped, and whitespace is skipped on both sides while they are compared, so a query
    decoded with left padding or one space more is found. Linear in ``len(prompt)``.
    """
    start = _PADDING.match(prompt)
    p = start.end() if start else 0
    end = len(prompt.rstrip())
    begin = _PADDING.match(query)
    q = begin.end() if begin else 0
    while p < end:
        if prompt[p].isspace():
            p += 1
        elif q < len(query) and query[q].isspace():
            q += 1
        elif q < len(query) and query[q] == prompt[p]:
            p, q = p + 1, q + 1
        else:
            return None
    trailing = len(prompt) - end  # the prompt's own trailing whitespace, as far as it goes
    while trailing and q < len(query) and query[q].isspace():
        q, trailing = q + 1, trailing - 1
    return query[q:]


def locate_truncated_response(query: str, prompt: str) -> str | None:
    """Return what follows the longest suffix of ``prompt`` that ``query`` starts with, or None
    when that suffix is shorter than :data:`MIN_TRUNCATED_PROMPT_CHARS`.

    OpenRLHF keeps a too-long prompt's last tokens (``SingleTurnAgentExecutor.execute`` in
    ``openrlhf/utils/agent.py``, 0.11.2: ``prompt_token_ids[-max_prompt_length:]``) and decodes
    them with the response: the query starts at a token boundary inside the prompt. Padding,
    whitespace and replacement characters (a multi-byte character cut by the boundary) at the
    query's start are skipped. Linear in ``len(prompt)``: the prefix function (Knuth, Morris
    and Pratt) of the query's head, a separator, and the prompt.
    """
    begin = _PADDING.match(query)
    q = begin.end() if begin else 0
    while q < len(query) and query[q] in "\ufffd \t\n\r":
        q += 1
    body = prompt.rstrip()
    text = query[q : q + len(body)] + "\x00" + body
    border = [0] * len(text)
    for i in range(1, len(text)):
        k = border[i - 1]
        while k and text[i] != text[k]:
            k = border[k - 1]
        border[i] = k + 1 if text[i] == text[k] else 0
    matched = border[-1]
    if matched < MIN_TRUNCATED_PROMPT_CHARS:
        return None
    rest = query[q + matched :]
    trailing = len(prompt) - len(body)  # the prompt's own trailing whitespace, as far as it goes
    skip = len(rest) - len(rest.lstrip())
    return rest[min(trailing, skip) :]


def to_items(
    request: GetRewardRequest,
    spec: str,
    end_tokens: tuple[str, ...] = (),
    truncated: list[int] | None = None,
) -> list[dict[str, Any] | BadInput]:
    """One gateway item per query, for ``spec``, or the error that fails that query alone.

    The response is what follows the prompt (:func:`locate_response`, else what follows the
    part of it a truncated query kept: :func:`locate_truncated_response`), without the
    end-of-sequence and padding tokens at its end (:func:`strip_end_tokens`, with
    ``end_tokens`` and the request's own).

    Args:
        request: OpenRLHF's request.
        spec: The reward spec of every item.
        end_tokens: End tokens besides :data:`END_TOKENS` and the request's.
        truncated: When given, the index of each query located as a truncated one is
            appended to it.

    Returns:
        Per query, its item, or a ``BadInput`` when its label is null or empty
        (``field="labels.<i>"``) or it does not hold its prompt (``field="query.<i>"``).

    Raises:
        BadInput: ``prompts`` or ``labels`` is missing (``field="prompts"`` / ``"labels"``):
            the request's shape, not an item's.
    """
    if request.prompts is None:
        raise BadInput(
            "prompts: OpenRLHF sends the prompts; without them the response cannot be told "
            "from the question",
            field="prompts",
        )
    if request.labels is None:
        raise BadInput(
            "labels: no labels; OpenRLHF sends each prompt's label from --data.label_key",
            field="labels",
        )
    items: list[dict[str, Any] | BadInput] = []
    for index, (query, prompt) in enumerate(zip(request.query, request.prompts, strict=True)):
        label = request.labels[index]
        if label is None or (isinstance(label, str | list | dict) and not label):
            items.append(
                BadInput(
                    f"labels.{index}: the label is {json.dumps(label)}; set --data.label_key "
                    "to the dataset's answer field (a null label would be scored against "
                    "nothing)",
                    field=f"labels.{index}",
                )
            )
            continue
        response = locate_response(query, prompt)
        if response is None:
            response = locate_truncated_response(query, prompt)
            if response is not None and truncated is not None:
                truncated.append(index)
        if response is None:
            items.append(
                BadInput(
                    f"query.{index}: its prompt (prompts.{index}) is not where the query "
                    "starts, even with padding and whitespace skipped, nor does the query "
                    f"start with its last {MIN_TRUNCATED_PROMPT_CHARS} characters or more (a "
                    "truncated prompt)",
                    field=f"query.{index}",
                )
            )
            continue
        response = strip_end_tokens(response, (*end_tokens, *request.end_tokens))
        item: dict[str, Any] = {"id": str(index), "spec": spec, "response": response}
        item["question"] = prompt
        item.update(rollout_fields(label))
        items.append(item)
    return items


def failed_reward(spec: RewardSpec) -> float:
    """The reward a trainer route gives a failed item of ``spec``: its ``failed_reward``,
    else its ``undecided_reward``.

    Raises:
        ConfigurationError: The spec sets neither (asked before any item is scored, so that
            every request to it is refused alike, not only those with a failed item).
    """
    value = spec.failed_value
    if value is None:
        raise ConfigurationError(
            f"spec {spec.name} sets neither failed_reward nor undecided_reward: the trainer "
            "routes cannot carry a missing reward, so they need the value a failed item gets "
            "(the spec's lowest reward)",
            field="failed_reward",
        )
    return value


def item_score(result: ItemResult, reward: float, score: Formula | None) -> float:
    """The score in [0, 1] of one scored item: ``score`` over its components' rewards
    (``details.sub_rewards``) and ``reward``, or the reward itself without one.

    Raises:
        ConfigurationError: The formula reads a component the item has no reward for, fails,
            or gives a value outside [0, 1] (the spec's ``score`` is wrong for this item).
    """
    if score is None:
        return reward
    values = _component_rewards(result)
    values["reward"] = reward
    try:
        value = score({name: float(values[name]) for name in score.names})
    except (KeyError, TypeError, FormulaError) as exc:
        raise ConfigurationError(
            f"the spec's score {score.source!r} cannot be computed for item {result.id}: "
            f"{type(exc).__name__} {exc}",
            field="score",
        ) from None
    if not 0.0 <= value <= 1.0:
        raise ConfigurationError(
            f"the spec's score {score.source!r} gave {value:g} for item {result.id}, outside "
            "[0, 1]; OpenRLHF's dynamic filtering compares the mean score with (0, 1)",
            field="score",
        )
    return value


def _component_rewards(result: ItemResult) -> dict[str, Any]:
    subs = result.details.get("sub_rewards", {})
    return {name: sub.get("reward") for name, sub in subs.items() if isinstance(sub, dict)}


def _outcome(
    index: int, result: ItemResult | BadInput, score: Formula | None
) -> tuple[float, float] | FailedItem:
    """One item's (reward, score), or why it failed.

    Raises:
        TribunalError: The item's error is one of :data:`RETRIED` (its class).
    """
    if isinstance(result, BadInput):
        return FailedItem(index=index, **ItemError.from_exception(result).model_dump())
    if result.error is not None and result.error.code in RETRIED:
        cls = ERRORS_BY_CODE.get(result.error.code, TribunalError)
        raise cls(
            f"item {index}: {result.error.message}; retry when the verifier is back",
            field=f"query.{index}",
            retry_after_s=1.0,
        )
    if result.error is not None or result.reward is None:
        error = result.error or ItemError(
            code="internal_error", message="no reward", retryable=False
        )
        # A schema error names the item's place among those scored (``items.<k>.``), which
        # is not its place in the request: ``index`` says that.
        field = _SCORED_PREFIX.sub("", error.field or "") or None
        return FailedItem(index=index, **error.model_dump(exclude={"field"}), field=field)
    try:
        value = 0.0 if result.details.get("undecided") else item_score(result, result.reward, score)
    except ConfigurationError as exc:
        return FailedItem(index=index, **ItemError.from_exception(exc).model_dump())
    return result.reward, value


def to_response(
    results: list[ItemResult | BadInput],
    components: list[str],
    failed: float,
    score: Formula | None = None,
) -> GetRewardResponse:
    """OpenRLHF's answer: every item's reward, score and logs, and the items that failed.

    Args:
        results: One per query, in order: its result, or the error that kept it from being
            scored (:func:`to_items`).
        components: The spec's component names (the keys of ``extra_logs`` beside
            ``undecided`` and ``failed``).
        failed: The reward of an item that failed (:func:`failed_reward`).
        score: The spec's ``score`` formula (:func:`item_score`); an undecided or failed
            item scores 0.

    Raises:
        TribunalError: Some item's error is the infrastructure's (:data:`RETRIED`): the
            request is refused with its class, retryable.
    """
    answer = GetRewardResponse(rewards=[], scores=[], extra_logs={}, errors=[])
    logs: dict[str, list[float]] = {name: [] for name in (*components, "undecided", "failed")}
    for index, result in enumerate(results):
        outcome = _outcome(index, result, score)
        is_failed = isinstance(outcome, FailedItem)
        reward, value = (failed, 0.0) if isinstance(outcome, FailedItem) else outcome
        answer.rewards.append(reward)
        answer.scores.append(value)
        if isinstance(outcome, FailedItem):
            answer.errors.append(outcome)
        subs = {} if is_failed or isinstance(result, BadInput) else _component_rewards(result)
        for name in components:
            sub = subs.get(name)
            logs[name].append(float(sub) if isinstance(sub, int | float) else 0.0)
        undecided = (
            not is_failed and isinstance(result, ItemResult) and result.details.get("undecided")
        )
        logs["undecided"].append(1.0 if undecided else 0.0)
        logs["failed"].append(1.0 if is_failed else 0.0)
    answer.extra_logs = logs
    return answer


def check_spec(spec: str, known: dict[str, Any]) -> None:
    """Raise ``BadInput`` naming the known specs when ``spec`` is not one of them."""
    if spec not in known:
        raise BadInput(f"spec: unknown spec {spec!r}; known: {', '.join(known)}", field="spec")
