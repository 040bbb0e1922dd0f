"""The citation reward, in one file: per-claim precision, recall and F1, and the reward.

Symbols (one answer; ``c`` a claim, ``ids(c)`` its distinct cited ids, ``E`` the evidence):

- **Recall of a cited claim** ``R(c)``: support of ``c`` by the union of its *valid* cited
  snippets: 1 supported, 0.5 partial, 0 unsupported (DR Tulu's recall levels,
  rlresearch/dr-tulu@6188f34 ``rl/open-instruct/open_instruct/search_rewards/utils/
  citation_utils.py``, ``citation_recall_has_citation_prompt``). No valid id: 0.
- **Precision of a cited claim** ``P(c) = Σ_{i ∈ ids(c) ∩ E} rel(c, i) / |ids(c)|``: the share
  of its citations that are relevant, one verdict per snippet (ALCE's citation precision,
  Gao et al. 2023, arXiv 2305.14627). An invented id counts in the denominator with
  relevance 0; citing every id of the evidence therefore lowers precision. (DR Tulu asks one
  relevance question for the concatenated snippets, so padding costs nothing there.)
- **F1 of a claim** ``F1(c) = 2·P·R / (P + R)`` (0 when both are 0), as DR Tulu.
- **Uncited sentences**: one that needs a citation has ``R = 0`` and ``F1 = 0`` (DR Tulu's
  ``citation_recall_no_citation_prompt``: "[[Yes]]" → 0). One that needs none is left out
  under the ``tribunal`` preset and counts as ``F1 = 1`` under ``dr_tulu`` (as DR Tulu does,
  which lets uncited filler raise the mean).
- **Gated claims** earn 0 without a model call: a claim citing only invented ids, and a
  claim that only repeats the question (``tribunal.citation.gates.echoes_question``).
  In the judge mode, a cited claim whose cited snippets contradict it (a number, a known
  entity, a negation or a direction differs: ``tribunal.citation.lexical.contradicted``) is
  ``contradicts_evidence`` and earns 0 without a model call.
  Under ``tribunal`` (``count_once_on_topic``) a claim whose content repeats an earlier
  claim's (``duplicate``) is left out of every mean, and a cited claim sharing no content
  stem with the question (``off_topic``) is judged but earns nothing: left out when
  supported, F1 = 0 otherwise. Padding can therefore never raise the reward.
  ``dr_tulu`` keeps DR Tulu's arithmetic, where both count as claims (and raise the mean
  when supported).
- **Aggregates**: ``precision`` = mean ``P(c)`` over cited claims; ``recall`` = mean ``R(c)``
  over counted claims (cited, plus uncited ones that need a citation); ``f1`` = mean
  ``F1(c)`` over counted claims (DR Tulu's ``avg_f1``, per claim then averaged). No counted
  claim: ``f1 = 0`` (an empty answer earns nothing).
- **valid_id_share** = distinct cited ids found in ``E`` / distinct cited ids; 0 when nothing
  is cited (DR Tulu's ``score_citation_format``).

The reward, side by side (``w_f1 + w_valid = 1``; both in [0, 1]):

==============  ==========================================  ===================================
term            ``dr_tulu`` preset                          ``tribunal`` preset (default)
==============  ==========================================  ===================================
formula         ``0.6·f1' + 0.4·valid_id_share``            ``gate · (1.0·f1 + 0.0·valid_id_share)``
``f1'`` / f1    mean F1 with no-need uncited sentences = 1  mean F1 over counted claims only
format gate     none (DR Tulu only checks ``<answer>``)     0 unless one closed answer block
                                                            with well-formed citation tags
source          ``citation = 0.6·avg_f1 + 0.4·format``      invented ids already cost precision,
                in ``longform_rubric_rewards.py``           so valid ids are not paid twice
==============  ==========================================  ===================================

Under both presets a response without an answer block scores 0 (DR Tulu: "no ``<answer>``
→ citation 0"). In support mode ``none`` no claim is judged: the reward is
``gate · valid_id_share`` and precision, recall and F1 are null.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from tribunal.citation.gates import FormatReport, IdReport
from tribunal.citation.parse import Claim
from tribunal.wire.citation import PresetName
from tribunal.wire.citation_verdicts import ClaimJudgment, Relevance, SupportVerdict

ClaimGate = Literal[
    "invalid_ids", "restates_question", "contradicts_evidence", "duplicate", "off_topic"
]


@dataclass(frozen=True)
class Preset:
    """How claim scores become one reward (see the table in the module docstring).

    Attributes:
        name: ``tribunal`` or ``dr_tulu``.
        f1_weight: Weight of the mean claim F1.
        valid_id_weight: Weight of the share of cited ids that exist.
        format_gate: Reward 0 unless the format is valid.
        uncited_without_need: ``skip`` (left out of the mean) or ``full`` (F1 = 1).
        count_once_on_topic: A claim whose content repeats an earlier claim's (``duplicate``)
            or, when the question is given, a cited claim sharing no content word with it
            (``off_topic``) is left out of the mean: repeating a supported claim or citing
            verbatim copies of an unrelated snippet never raises the reward.
    """

    name: PresetName
    f1_weight: float
    valid_id_weight: float
    format_gate: bool
    uncited_without_need: Literal["skip", "full"]
    count_once_on_topic: bool = False

    def __post_init__(self) -> None:
        if min(self.f1_weight, self.valid_id_weight) < 0:
            raise ValueError("citation weights must be >= 0")
        if abs(self.f1_weight + self.valid_id_weight - 1.0) > 1e-9:
            raise ValueError(
                f"f1_weight + valid_id_weight must be 1 (got {self.f1_weight} + "
                f"{self.valid_id_weight}) so that the reward stays in [0, 1]"
            )


PRESETS: dict[str, Preset] = {
    "tribunal": Preset(
        "tribunal",
        1.0,
        0.0,
        format_gate=True,
        uncited_without_need="skip",
        count_once_on_topic=True,
    ),
    "dr_tulu": Preset("dr_tulu", 0.6, 0.4, format_gate=False, uncited_without_need="full"),
}
"""The presets by name."""


@dataclass(frozen=True)
class ClaimScore:
    """One claim's scores.

    Attributes:
        claim: The parsed claim.
        invalid_ids: Its cited ids absent from the evidence.
        gate: Why it was scored 0 without a model call, or None.
        judgment: The support mode's judgment (None: gated, or mode ``none``).
        precision: ``P(c)`` for a cited claim, else None.
        recall: ``R(c)`` for a counted claim, else None.
        f1: ``F1(c)`` for a counted claim, else None.
        counted: Whether it enters the aggregate recall and F1 (``tribunal`` preset).
    """

    claim: Claim
    invalid_ids: tuple[str, ...]
    gate: ClaimGate | None
    judgment: ClaimJudgment | None
    precision: float | None
    recall: float | None
    f1: float | None
    counted: bool


@dataclass(frozen=True)
class AnswerScore:
    """The aggregate of one answer.

    Attributes:
        reward: In [0, 1].
        precision: Mean claim precision over cited claims, or None.
        recall: Mean claim recall over counted claims, or None.
        f1: Mean claim F1 over counted claims (0 when none is counted), or None in mode
            ``none``.
        f1_term: The F1 the preset pays (``f1'`` for ``dr_tulu``), or None.
        gate_passed: False when the preset's format gate zeroed the reward.
    """

    reward: float
    precision: float | None
    recall: float | None
    f1: float | None
    f1_term: float | None
    gate_passed: bool


def f1_score(precision: float, recall: float) -> float:
    """Harmonic mean of two values in [0, 1]; 0 when both are 0.

    Examples:
        >>> f1_score(0.5, 1.0)
        0.6666666666666666
    """
    total = precision + recall
    return 2 * precision * recall / total if total > 0 else 0.0


def score_claim(
    claim: Claim,
    invalid_ids: tuple[str, ...],
    gate: ClaimGate | None,
    judgment: ClaimJudgment | None,
) -> ClaimScore:
    """Score one claim from its gate and judgment (see the module docstring).

    Args:
        claim: The claim.
        invalid_ids: Its cited ids that are not in the evidence.
        gate: A deterministic reason for 0 (``off_topic``: for 0 unless supported, then left
            out; ``duplicate``: left out), or None.
        judgment: The support mode's judgment, None when gated (but for ``off_topic``) or in
            mode ``none``.
    """
    if gate == "duplicate" or (gate == "off_topic" and _supported(judgment)):
        return ClaimScore(claim, invalid_ids, gate, judgment, None, None, None, counted=False)
    if gate == "off_topic":
        return ClaimScore(claim, invalid_ids, gate, judgment, 0.0, 0.0, 0.0, counted=True)
    if gate is not None:
        return ClaimScore(claim, invalid_ids, gate, None, 0.0, 0.0, 0.0, counted=True)
    if judgment is None:
        return ClaimScore(claim, invalid_ids, None, None, None, None, None, counted=False)
    if claim.is_cited:
        assert judgment.support is not None, "a cited claim's judgment has a support verdict"
        relevant = sum(1 for v in judgment.relevance.values() if v is Relevance.RELEVANT)
        precision = relevant / len(claim.ids)
        recall = judgment.support.recall
        f1 = f1_score(precision, recall)
        return ClaimScore(claim, invalid_ids, None, judgment, precision, recall, f1, True)
    if judgment.needs_citation:
        return ClaimScore(claim, invalid_ids, None, judgment, None, 0.0, 0.0, counted=True)
    return ClaimScore(claim, invalid_ids, None, judgment, None, None, None, counted=False)


def _supported(judgment: ClaimJudgment | None) -> bool:
    """Judged supported; an unjudged claim (mode ``none``) counts as such here."""
    return judgment is None or judgment.support is SupportVerdict.SUPPORTED


def aggregate(
    claims: Sequence[ClaimScore],
    fmt: FormatReport,
    ids: IdReport,
    preset: Preset,
    *,
    judged: bool,
) -> AnswerScore:
    """Combine claim scores into the answer's reward under ``preset``.

    Args:
        claims: Every claim of the answer, scored.
        fmt: The format report.
        ids: The id report.
        preset: The formula.
        judged: False in support mode ``none`` (no claim was judged).

    Returns:
        The reward (in [0, 1]) and the aggregates.
    """
    gate_passed = fmt.is_valid or not preset.format_gate
    if not fmt.has_answer:
        return AnswerScore(0.0, None, None, None, None, gate_passed=False)
    if not judged:
        reward = ids.valid_share if gate_passed else 0.0
        return AnswerScore(reward, None, None, None, None, gate_passed)
    precisions = [c.precision for c in claims if c.precision is not None]
    counted = [c for c in claims if c.counted]
    recall = _mean([c.recall for c in counted if c.recall is not None])
    f1 = _mean([c.f1 for c in counted if c.f1 is not None]) or 0.0
    f1_term = f1
    if preset.uncited_without_need == "full":
        no_need = [c for c in claims if not c.counted and c.judgment is not None]
        terms = [c.f1 or 0.0 for c in counted] + [1.0] * len(no_need)
        f1_term = _mean(terms) or 0.0
    raw = preset.f1_weight * f1_term + preset.valid_id_weight * ids.valid_share
    reward = min(1.0, max(0.0, raw)) if gate_passed else 0.0
    return AnswerScore(reward, _mean(precisions), recall, f1, f1_term, gate_passed)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None
