"""Calibration of a support mode against human labels (``tribunal calibrate citation``).

A labelled set is JSONL, one claim per line::

    {"answer": "a1", "question": "…", "claim": "…", "evidence": {"E1": "…"},
     "label": "supported"}

``label`` is the human judgment of whether the evidence supports the claim (``supported`` or
``unsupported``); ``answer`` groups the claims of one answer (for the per-answer figures);
``question`` is optional. Each claim is scored as an answer of one cited claim
(``<answer><cite id=E1,E2>claim</cite></answer>``) through the chosen support mode, and
:func:`agreement` compares the verdicts with the labels:

- precision and recall of ``supported`` (the positive class: what pays in full);
- Cohen's kappa of supported vs not (Cohen 1960, ``(p_o - p_e) / (1 - p_e)``);
- the confusion table (human label × verdict: supported, partial, unsupported, gated);
- per answer, the reward (mean claim recall: 1 / 0.5 / 0) against the share of its claims
  humans found supported: Pearson's correlation and the mean absolute gap;
- the sizes of the disagreement classes (human supported but paid partial or nothing; human
  unsupported but paid in full or in part).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tribunal.core.agreement import cohen_kappa, figure, pearson, precision_recall
from tribunal.wire.citation import CitationItem
from tribunal.wire.errors import BadInput

HumanLabel = Literal["supported", "unsupported"]
Verdict = Literal["supported", "partial", "unsupported", "gated"]
VERDICTS: tuple[Verdict, ...] = ("supported", "partial", "unsupported", "gated")
_RECALL = {"supported": 1.0, "partial": 0.5, "unsupported": 0.0, "gated": 0.0}


@dataclass(frozen=True)
class LabelledClaim:
    """One line of a labelled set.

    Attributes:
        answer: The answer it belongs to.
        claim: The claim's text.
        evidence: Its cited passages, ``{id: text}``.
        label: The human judgment.
        question: The question, or None.
    """

    answer: str
    claim: str
    evidence: dict[str, str]
    label: HumanLabel
    question: str | None = None

    def item(self, item_id: str, support: str) -> CitationItem:
        """The claim as an answer of one claim citing every passage, judged by ``support``."""
        ids = ",".join(self.evidence)
        response = f"<answer><cite id={ids}>{self.claim}</cite></answer>"
        return CitationItem(
            id=item_id,
            response=response,
            evidence=self.evidence,
            question=self.question,
            options={"support": support},
        )


def read_labels(path: Path) -> list[LabelledClaim]:
    """Read a labelled set.

    Raises:
        BadInput: A line is not a JSON object with the fields above (the message names the
            line and the field).
    """
    out = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BadInput(f"{path}:{number}: not JSON ({exc.msg})") from exc
        out.append(_labelled(row, f"{path}:{number}"))
    if not out:
        raise BadInput(f"{path}: no labelled claim")
    return out


def _labelled(row: Any, where: str) -> LabelledClaim:
    if not isinstance(row, dict):
        raise BadInput(f"{where}: a line must be a JSON object")
    unknown = set(row) - {"answer", "question", "claim", "evidence", "label"}
    if unknown:
        raise BadInput(f"{where}: unknown field {sorted(unknown)[0]!r}", field=sorted(unknown)[0])
    for name in ("answer", "claim"):
        if not isinstance(row.get(name), str) or not row[name].strip():
            raise BadInput(f"{where}: field {name!r} must be a non-empty string", field=name)
    evidence = row.get("evidence")
    if (
        not isinstance(evidence, dict)
        or not evidence
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in evidence.items())
    ):
        raise BadInput(
            f"{where}: field 'evidence' must be a non-empty {{id: text}}", field="evidence"
        )
    if row.get("label") not in ("supported", "unsupported"):
        raise BadInput(f"{where}: field 'label' must be supported or unsupported", field="label")
    question = row.get("question")
    if question is not None and not isinstance(question, str):
        raise BadInput(f"{where}: field 'question' must be a string", field="question")
    return LabelledClaim(row["answer"], row["claim"], evidence, row["label"], question)


def verdict_of(details: dict[str, Any]) -> Verdict:
    """The verdict of a one-claim answer's details (``gated``: a gate zeroed it first)."""
    [claim] = [c for c in details["claims"] if c["cited"]] or [None]
    if claim is None or claim["gate"] not in (None, "off_topic"):
        return "gated"
    support = claim["support"]
    return support if support in ("supported", "partial", "unsupported") else "gated"


@dataclass
class Agreement:
    """Agreement of verdicts with human labels (see the module docstring).

    Attributes:
        claims: Claims compared.
        answers: Answers compared.
        precision: Of ``supported``, or None when nothing was supported.
        recall: Of ``supported``, or None when humans supported nothing.
        kappa: Cohen's kappa of supported vs not, or None when undefined.
        confusion: ``{human label: {verdict: count}}``.
        answer_correlation: Pearson's r of reward vs human share per answer, or None.
        answer_mean_gap: Mean absolute difference of the two per answer.
        disagreements: Sizes of the disagreement classes by name.
    """

    claims: int
    answers: int
    precision: float | None
    recall: float | None
    kappa: float | None
    confusion: dict[str, dict[str, int]] = field(default_factory=dict)
    answer_correlation: float | None = None
    answer_mean_gap: float = 0.0
    disagreements: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (floats rounded to 3 places)."""
        out: dict[str, Any] = {}
        for name, value in self.__dict__.items():
            out[name] = round(value, 3) if isinstance(value, float) else value
        return out


def agreement(labels: Sequence[LabelledClaim], verdicts: Sequence[Verdict]) -> Agreement:
    """Compare verdicts with human labels, claim by claim and per answer.

    Args:
        labels: The labelled claims.
        verdicts: One verdict per labelled claim, in order.

    Raises:
        ValueError: The two sequences differ in length.
    """
    if len(labels) != len(verdicts):
        raise ValueError("one verdict per labelled claim")
    pairs = [
        (claim.label == "supported", verdict == "supported")
        for claim, verdict in zip(labels, verdicts, strict=True)
    ]
    precision, recall = precision_recall(pairs)
    confusion: dict[str, dict[str, int]] = {
        label: {str(v): 0 for v in VERDICTS} for label in ("supported", "unsupported")
    }
    for claim, verdict in zip(labels, verdicts, strict=True):
        confusion[claim.label][verdict] += 1
    per_answer: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for claim, verdict in zip(labels, verdicts, strict=True):
        per_answer[claim.answer].append((_RECALL[verdict], float(claim.label == "supported")))
    rewards = [sum(r for r, _ in rows) / len(rows) for rows in per_answer.values()]
    shares = [sum(h for _, h in rows) / len(rows) for rows in per_answer.values()]
    human_supported, human_unsupported = confusion["supported"], confusion["unsupported"]
    return Agreement(
        claims=len(pairs),
        answers=len(per_answer),
        precision=precision,
        recall=recall,
        kappa=cohen_kappa(pairs),
        confusion=confusion,
        answer_correlation=pearson(rewards, shares),
        answer_mean_gap=sum(abs(r - s) for r, s in zip(rewards, shares, strict=True))
        / len(rewards),
        disagreements={
            "supported_paid_partial": human_supported["partial"],
            "supported_paid_nothing": human_supported["unsupported"] + human_supported["gated"],
            "unsupported_paid_in_full": human_unsupported["supported"],
            "unsupported_paid_partial": human_unsupported["partial"],
        },
    )


def report(result: Agreement, mode: str) -> str:
    """The calibration as text: the figures, the confusion table, the disagreements."""

    lines = [
        f"support mode {mode}: {result.claims} claims in {result.answers} answers",
        f"supported: precision {figure(result.precision)}, recall {figure(result.recall)}; "
        f"Cohen's kappa {figure(result.kappa)}",
        f"per answer: reward vs human share r = {figure(result.answer_correlation)}, "
        f"mean |gap| {result.answer_mean_gap:.3f}",
        "",
        "human \\ verdict  " + "  ".join(f"{v:>11}" for v in VERDICTS),
    ]
    for label, row in result.confusion.items():
        lines.append(f"{label:<16} " + "  ".join(f"{row[v]:>11}" for v in VERDICTS))
    lines.append("")
    lines += [f"{name}: {count}" for name, count in result.disagreements.items()]
    return "\n".join(lines)
