"""Pydantic models of the judge's payload: the item it scores and the details it returns.

An item gives its rubrics in any of three shapes (see ``tribunal.wire.rubrics``); all of
them normalise to one list of :class:`~tribunal.wire.rubrics.Rubric` through
:meth:`JudgeItem.instance_rubrics`. Static sets (``rubric_sets``) are added by the verifier.
"""

from __future__ import annotations

import enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, field_validator, model_validator

from tribunal.wire.envelope import ItemError, ScoreItem
from tribunal.wire.rubric_sets import load_rubric_set
from tribunal.wire.rubrics import Polarity, Rubric, resolve_polarity_and_weight

MAX_QUESTION_CHARS = 200_000
MAX_RESPONSE_CHARS = 400_000
MAX_RUBRIC_CHARS = 8_000
MAX_RUBRICS_PER_ITEM = 256
MAX_RUBRIC_WEIGHT = 1e6
"""Bound on a rubric's |weight|: 256 rubrics of it sum to a finite total (1e308 overflowed)."""


class RubricInput(BaseModel):
    """One rubric as a client sends it (Tribunal's or DR Tulu's shape).

    Exactly one of ``text`` and ``description`` (DR Tulu's name) holds the criterion.
    """

    model_config = ConfigDict(extra="forbid")

    text: str | None = Field(default=None, max_length=MAX_RUBRIC_CHARS, description="Criterion.")
    description: str | None = Field(
        default=None, max_length=MAX_RUBRIC_CHARS, description="Criterion (DR Tulu's name)."
    )
    weight: StrictFloat | None = Field(
        default=None,
        ge=-MAX_RUBRIC_WEIGHT,
        le=MAX_RUBRIC_WEIGHT,
        allow_inf_nan=False,
        description=(
            "Magnitude in the reward (default 1), at most 1e6 in absolute value. Without "
            "`polarity`, a negative weight marks a negative rubric (DR Tulu)."
        ),
    )
    polarity: Polarity | None = Field(
        default=None,
        description="positive: the response should satisfy it; negative: a flaw to avoid.",
    )
    title: str | None = Field(default=None, max_length=500, description="Short name (not judged).")
    category: str | None = Field(
        default=None, max_length=100, description="Free label kept in details (e.g. tool_use)."
    )

    @model_validator(mode="after")
    def _one_criterion(self) -> RubricInput:
        given = [v for v in (self.text, self.description) if v is not None]
        if len(given) != 1:
            raise ValueError("give the criterion in exactly one of `text` and `description`")
        if not given[0].strip():
            raise ValueError("the criterion is empty")
        resolve_polarity_and_weight(self.weight, self.polarity)  # fail early, with the field
        return self

    def to_rubric(self, default: Polarity = Polarity.POSITIVE) -> Rubric:
        """Normalise to a :class:`Rubric`; ``default`` is the polarity of the list it is in."""
        polarity, weight = resolve_polarity_and_weight(self.weight, self.polarity, default=default)
        criterion = self.text if self.text is not None else self.description
        assert criterion is not None  # guaranteed by _one_criterion
        return Rubric(
            text=criterion.strip(),
            polarity=polarity,
            weight=weight,
            title=self.title,
            category=self.category,
        )


class JudgeItem(ScoreItem):
    """One response to grade against rubrics.

    Rubrics come in ``rubrics`` (Tribunal's shape or DR Tulu's ``{description, weight}``),
    and/or ``positive_rubrics`` / ``negative_rubrics`` (DR Tulu's adaptive shape: objects or
    plain strings). ``rubric_sets`` adds named static sets; omitted, the service's default
    sets apply; ``[]`` means instance rubrics only.
    """

    question: str = Field(
        min_length=1, max_length=MAX_QUESTION_CHARS, description="The prompt being answered."
    )
    response: str = Field(
        max_length=MAX_RESPONSE_CHARS, description="The completion to grade (treated as data)."
    )
    rubrics: list[RubricInput] = Field(default_factory=list, max_length=MAX_RUBRICS_PER_ITEM)
    positive_rubrics: list[RubricInput | str] = Field(
        default_factory=list, max_length=MAX_RUBRICS_PER_ITEM
    )
    negative_rubrics: list[RubricInput | str] = Field(
        default_factory=list, max_length=MAX_RUBRICS_PER_ITEM
    )
    rubric_sets: list[str] | None = Field(
        default=None,
        max_length=16,
        description="Static sets to add (`v3`, `general`, or pinned `v3@1`); [] = none.",
    )

    @field_validator("rubric_sets")
    @classmethod
    def _known_sets(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        for spec in value:
            try:
                load_rubric_set(spec)
            except KeyError as exc:
                raise ValueError(exc.args[0]) from None
        if len(set(value)) != len(value):
            raise ValueError("a rubric set is named twice")
        return value

    @model_validator(mode="after")
    def _some_rubrics(self) -> JudgeItem:
        n_instance = len(self.rubrics) + len(self.positive_rubrics) + len(self.negative_rubrics)
        if n_instance > MAX_RUBRICS_PER_ITEM:
            raise ValueError(f"more than {MAX_RUBRICS_PER_ITEM} rubrics in one item")
        if n_instance == 0 and self.rubric_sets == []:
            raise ValueError("no rubrics: give `rubrics` (or the DR Tulu lists) or `rubric_sets`")
        self.instance_rubrics()  # raises ValueError on a polarity contradiction
        return self

    def instance_rubrics(self) -> list[Rubric]:
        """Return the item's own rubrics, normalised, in input order (rubrics, +, -)."""
        out = [r.to_rubric() for r in self.rubrics]
        for name, polarity in (
            ("positive_rubrics", Polarity.POSITIVE),
            ("negative_rubrics", Polarity.NEGATIVE),
        ):
            for entry in getattr(self, name):
                if isinstance(entry, str):
                    if not entry.strip():
                        raise ValueError(f"`{name}` holds an empty criterion")
                    out.append(Rubric(text=entry.strip(), polarity=polarity))
                    continue
                rubric = entry.to_rubric(default=polarity)
                if rubric.polarity is not polarity:
                    raise ValueError(
                        f"a rubric in `{name}` is {rubric.polarity.value} (polarity or weight sign)"
                    )
                out.append(rubric)
        return out


class RubricVerdict(enum.StrEnum):
    """The categorical outcome of one rubric (levels 2 / 1 / 0 of the judge's verdict)."""

    MET = "met"
    PARTIALLY_MET = "partially_met"
    NOT_MET = "not_met"
    PRESENT = "present"
    PARTIALLY_PRESENT = "partially_present"
    ABSENT = "absent"

    @classmethod
    def from_level(cls, level: int, polarity: Polarity) -> RubricVerdict:
        """Map a verdict level (0, 1, 2) and a polarity to its name."""
        names = (
            (cls.NOT_MET, cls.PARTIALLY_MET, cls.MET)
            if polarity is Polarity.POSITIVE
            else (cls.ABSENT, cls.PARTIALLY_PRESENT, cls.PRESENT)
        )
        return names[level]


class RubricResult(BaseModel):
    """The judge's answer for one rubric of an item."""

    index: int = Field(description="Position among the item's rubrics (instance, then sets).")
    text: str
    title: str | None = None
    polarity: Polarity
    weight: float = Field(description="Magnitude, > 0.")
    source: str = Field(description="`instance` or the set it came from (`v3@1`).")
    category: str | None = None
    verdict: RubricVerdict | None = Field(default=None, description="The judge's level.")
    score: float | None = Field(
        default=None,
        description=(
            "s in [0, 1]: how far the criterion holds (positive) or the flaw is present "
            "(negative); the expected level / 2 when log-probabilities were available."
        ),
    )
    reward_term: float | None = Field(
        default=None, description="What enters the weighted mean: s (positive) or 1 - s."
    )
    score_source: Literal["logprobs", "verdict"] | None = Field(
        default=None, description="logprobs: expected score; verdict: level / 2."
    )
    verdict_probs: dict[str, float] | None = Field(
        default=None, description="P(level) for levels 0, 1, 2 when log-probabilities were read."
    )
    verdict_flag: str | None = Field(
        default=None,
        description=(
            "logprobs_contradict_verdict: the verdict token's log-probabilities favour another "
            "level than the one the judge wrote; the written level is scored (score_source "
            "verdict) and verdict_probs shows the distribution."
        ),
    )
    reason: str | None = Field(default=None, description="The judge's short reason.")
    cached: bool = Field(default=False, description="Served from the verdict cache.")
    error: ItemError | None = Field(default=None, description="Why this rubric has no score.")


class JudgeUsage(BaseModel):
    """Model calls and tokens spent on one item (cached verdicts cost nothing)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_rubrics: int = 0
    cost_usd: float | None = Field(
        default=None,
        description="The tokens at the judge model's price (TRIBUNAL_JUDGE_PRICE), USD; null "
        "when the model is not priced.",
    )


class JudgeDetails(BaseModel):
    """``details`` of a judge result."""

    rubrics: list[RubricResult]
    judge_model: str
    backend: str
    prompt_version: str
    aggregation: str
    rubric_sets: list[str] = Field(description="Sets added to the item's own rubrics.")
    raw_reward: float | None = Field(
        default=None, description="The aggregate before clipping to [0, 1] (dr_tulu only)."
    )
    usage: JudgeUsage

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready details dict of an ``ItemOutcome``."""
        return self.model_dump(mode="json")
