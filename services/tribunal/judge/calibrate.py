"""Calibration of the rubric judge against human rubric verdicts (``tribunal calibrate judge``).

A labelled set is JSONL in the row format of HealthBench's physician meta-evaluation
(openai/simple-evals, ``healthbench_meta_eval.py``: one row per response and rubric item,
each with the binary verdicts of one or more physicians)::

    {"prompt": [{"role": "user", "content": "…"}], "completion": "…",
     "rubric": "…", "binary_labels": [true, false], "prompt_id": "p1",
     "completion_id": "c1", "category": "…", "anonymized_physician_ids": ["…", "…"]}

``prompt`` is the conversation (a list of ``{role, content}``) or a plain question;
``completion`` the response judged; ``rubric`` one criterion the response should meet;
``binary_labels`` the human verdicts (met or not). ``prompt_id`` and ``completion_id``
group the rubric rows of one response (without them, the prompt and completion texts do);
``category``, ``anonymized_physician_ids`` and ``canary`` are read and not used.

The human verdict of a row is the majority of its ``binary_labels``; a tie has none and is
left out of the per-item figures (counted as ``ties``). The rows of one response are judged
as one item whose rubrics are its rows (positive, weight 1: how a training reward asks
them), and :func:`agreement` compares the judge's verdicts with the human ones:

- precision and recall of ``met`` (the judge's level 2; partially met is not met);
- Cohen's kappa of met vs not (Cohen 1960, ``(p_o - p_e) / (1 - p_e)``);
- the confusion table (human verdict × judge verdict: met, partially met, not met);
- per response, the judge's reward against the share of its rubric items humans found met:
  Pearson's correlation and the mean absolute gap.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tribunal.core.agreement import cohen_kappa, figure, pearson, precision_recall
from tribunal.wire.errors import BadInput
from tribunal.wire.judge import JudgeItem, RubricInput

JudgeVerdict = Literal["met", "partially_met", "not_met"]
JUDGE_VERDICTS: tuple[JudgeVerdict, ...] = ("met", "partially_met", "not_met")
FIELDS = frozenset(
    {
        "prompt",
        "completion",
        "rubric",
        "binary_labels",
        "prompt_id",
        "completion_id",
        "category",
        "anonymized_physician_ids",
        "canary",
    }
)
"""The fields a row may have (HealthBench's meta-evaluation rows); any other is refused."""


@dataclass(frozen=True)
class LabelledRubric:
    """One row of a labelled set.

    Attributes:
        response: The key of the response it belongs to.
        question: The conversation, rendered as text (``role: content`` per message).
        response_text: The response judged.
        rubric: The criterion.
        labels: The human verdicts, met or not.
    """

    response: str
    question: str
    response_text: str
    rubric: str
    labels: tuple[bool, ...]

    @property
    def human(self) -> bool | None:
        """The majority of the human verdicts; None on a tie."""
        met = sum(self.labels)
        if 2 * met == len(self.labels):
            return None
        return 2 * met > len(self.labels)


@dataclass(frozen=True)
class LabelledResponse:
    """The rows of one response, judged as one item."""

    key: str
    question: str
    response: str
    rubrics: tuple[LabelledRubric, ...]

    def item(self, item_id: str) -> JudgeItem:
        """The response as a judge item whose rubrics are its rows (positive, weight 1)."""
        return JudgeItem(
            id=item_id,
            question=self.question,
            response=self.response,
            rubrics=[RubricInput(text=r.rubric) for r in self.rubrics],
            rubric_sets=[],
        )


def read_labels(path: Path, limit: int | None = None) -> list[LabelledResponse]:
    """Read a labelled set, grouped by response in first-seen order.

    Args:
        path: The JSONL file.
        limit: Keep the first ``limit`` responses only (None: all).

    Raises:
        BadInput: A line is not a JSON object with the fields above (the message names the
            line and the field), or the file holds no row.
    """
    groups: dict[str, list[LabelledRubric]] = {}
    texts: dict[str, tuple[str, str]] = {}
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise BadInput(f"{path}:{number}: not JSON ({exc.msg})") from exc
            rubric = _labelled(row, f"{path}:{number}")
            if rubric.response not in groups:
                if limit is not None and len(groups) >= limit:
                    break
                groups[rubric.response] = []
                texts[rubric.response] = (rubric.question, rubric.response_text)
            groups[rubric.response].append(rubric)
    if not groups:
        raise BadInput(f"{path}: no labelled rubric")
    return [LabelledResponse(key, *texts[key], tuple(rubrics)) for key, rubrics in groups.items()]


def _labelled(row: Any, where: str) -> LabelledRubric:
    if not isinstance(row, dict):
        raise BadInput(f"{where}: a line must be a JSON object")
    unknown = sorted(set(row) - FIELDS)
    if unknown:
        raise BadInput(f"{where}: unknown field {unknown[0]!r}", field=unknown[0])
    question = _question(row.get("prompt"), where)
    for name in ("completion", "rubric"):
        if not isinstance(row.get(name), str) or not row[name].strip():
            raise BadInput(f"{where}: field {name!r} must be a non-empty string", field=name)
    labels = row.get("binary_labels")
    if (
        not isinstance(labels, list)
        or not labels
        or not all(isinstance(label, bool) for label in labels)
    ):
        raise BadInput(
            f"{where}: field 'binary_labels' must be a non-empty list of true / false",
            field="binary_labels",
        )
    ids = [row.get("prompt_id"), row.get("completion_id")]
    for name, value in zip(("prompt_id", "completion_id"), ids, strict=True):
        if value is not None and not isinstance(value, str):
            raise BadInput(f"{where}: field {name!r} must be a string", field=name)
    if all(value is not None for value in ids):
        key = json.dumps(ids)
    else:
        key = json.dumps([question, row["completion"]])
    return LabelledRubric(key, question, row["completion"], row["rubric"], tuple(labels))


def _question(prompt: Any, where: str) -> str:
    """The conversation as the judge's question: a plain string as is; messages as
    ``role: content`` paragraphs (the judge fences it whole)."""
    if isinstance(prompt, str) and prompt.strip():
        return prompt
    if isinstance(prompt, list) and prompt:
        turns = []
        for message in prompt:
            if not (
                isinstance(message, dict)
                and isinstance(message.get("role"), str)
                and isinstance(message.get("content"), str)
            ):
                break
            turns.append(f"{message['role']}: {message['content']}")
        else:
            return "\n\n".join(turns)
    raise BadInput(
        f"{where}: field 'prompt' must be a non-empty string or a list of "
        "{role, content} messages",
        field="prompt",
    )


@dataclass
class Agreement:
    """Agreement of the judge's verdicts with human ones (see the module docstring).

    Attributes:
        responses: Responses compared.
        rubrics: Rubric rows compared (ties left out).
        ties: Rows whose human verdicts tie (no human verdict).
        precision: Of ``met``, or None when the judge found nothing met.
        recall: Of ``met``, or None when humans found nothing met.
        kappa: Cohen's kappa of met vs not, or None when undefined.
        confusion: ``{human verdict: {judge verdict: count}}``.
        response_correlation: Pearson's r of the judge's reward vs the human share of met
            rubric items per response, or None.
        response_mean_gap: Mean absolute difference of the two per response.
    """

    responses: int
    rubrics: int
    ties: int
    precision: float | None
    recall: float | None
    kappa: float | None
    confusion: dict[str, dict[str, int]] = field(default_factory=dict)
    response_correlation: float | None = None
    response_mean_gap: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (floats rounded to 3 places)."""
        return {
            name: round(value, 3) if isinstance(value, float) else value
            for name, value in self.__dict__.items()
        }


def agreement(
    responses: Sequence[LabelledResponse],
    verdicts: Sequence[Sequence[JudgeVerdict]],
    rewards: Sequence[float],
) -> Agreement:
    """Compare the judge's verdicts with the human ones, per rubric row and per response.

    Args:
        responses: The labelled responses.
        verdicts: Per response, one judge verdict per rubric row, in order.
        rewards: Per response, the judge's reward in [0, 1].

    Raises:
        ValueError: The sequences do not line up.
    """
    if not (len(responses) == len(verdicts) == len(rewards)):
        raise ValueError("one verdict list and one reward per labelled response")
    pairs: list[tuple[bool, bool]] = []
    confusion = {human: {str(v): 0 for v in JUDGE_VERDICTS} for human in ("met", "not_met")}
    ties = 0
    judged: list[float] = []
    shares: list[float] = []
    for response, said, reward in zip(responses, verdicts, rewards, strict=True):
        if len(said) != len(response.rubrics):
            raise ValueError(f"response {response.key}: one verdict per rubric row")
        humans = []
        for rubric, verdict in zip(response.rubrics, said, strict=True):
            human = rubric.human
            if human is None:
                ties += 1
                continue
            humans.append(human)
            pairs.append((human, verdict == "met"))
            confusion["met" if human else "not_met"][verdict] += 1
        if humans:
            judged.append(reward)
            shares.append(sum(humans) / len(humans))
    precision, recall = precision_recall(pairs)
    gaps = [abs(r - s) for r, s in zip(judged, shares, strict=True)]
    return Agreement(
        responses=len(responses),
        rubrics=len(pairs),
        ties=ties,
        precision=precision,
        recall=recall,
        kappa=cohen_kappa(pairs),
        confusion=confusion,
        response_correlation=pearson(judged, shares),
        response_mean_gap=sum(gaps) / len(gaps) if gaps else 0.0,
    )


def verdicts_of(details: dict[str, Any]) -> list[JudgeVerdict]:
    """The judge's verdict of each rubric of one item's details, in order.

    Raises:
        ValueError: A rubric has no verdict (its error is named).
    """
    out: list[JudgeVerdict] = []
    for rubric in details["rubrics"]:
        verdict = rubric.get("verdict")
        if verdict not in JUDGE_VERDICTS:
            raise ValueError(f"rubric {rubric.get('index')} has no verdict: {rubric.get('error')}")
        out.append(verdict)
    return out


def report(result: Agreement) -> str:
    """The calibration as text: the figures and the confusion table."""

    lines = [
        f"rubric judge: {result.rubrics} rubric items of {result.responses} responses "
        f"({result.ties} human ties left out)",
        f"met: precision {figure(result.precision)}, recall {figure(result.recall)}; "
        f"Cohen's kappa {figure(result.kappa)}",
        f"per response: reward vs human share met r = {figure(result.response_correlation)}, "
        f"mean |gap| {result.response_mean_gap:.3f}",
        "",
        "human \\ judge  " + "  ".join(f"{v:>13}" for v in JUDGE_VERDICTS),
    ]
    for human, row in result.confusion.items():
        lines.append(f"{human:<14} " + "  ".join(f"{row[v]:>13}" for v in JUDGE_VERDICTS))
    return "\n".join(lines)
