"""Rubrics: one criterion with a polarity and a weight, and the shapes they arrive in.

A *positive* rubric names something a good response does ("states the dosage"); the judge
is asked whether the response satisfies it. A *negative* rubric names a flaw ("confuses
correlation with causation"); the judge is asked whether the response exhibits it, and the
rubric enters the reward as ``1 - s``. Weights are magnitudes (> 0); the polarity carries
the sign.

Three input shapes are accepted and normalised to one list of :class:`Rubric`:

1. Tribunal's own: ``{"text", "weight"?, "polarity", "title"?}``.
2. DR Tulu's ground truth: ``{"description", "weight"}``, where a negative weight marks a
   negative rubric (``open_instruct/search_rewards/utils/rubric_utils.py`` in
   rlresearch/dr-tulu).
3. DR Tulu's adaptive rubrics: ``positive_rubrics`` / ``negative_rubrics`` lists of
   ``{"description", "title"}`` (or plain strings).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Any


class Polarity(enum.StrEnum):
    """Whether meeting the criterion is good (``positive``) or a flaw (``negative``)."""

    POSITIVE = "positive"
    NEGATIVE = "negative"


@dataclass(frozen=True)
class Rubric:
    """One criterion to grade a response against.

    Attributes:
        text: The criterion, as the judge reads it.
        polarity: See :class:`Polarity`.
        weight: Magnitude of the rubric in the reward, > 0.
        title: Short name for people and logs (not shown to the judge).
        source: ``instance`` for the item's own rubrics, ``<set>@<revision>`` for a static set.
        category: Free label carried through to details (e.g. DR Tulu's ``tool_use``).
    """

    text: str
    polarity: Polarity = Polarity.POSITIVE
    weight: float = 1.0
    title: str | None = None
    source: str = "instance"
    category: str | None = None

    def __post_init__(self) -> None:
        if not self.text.strip():
            raise ValueError("rubric text is empty")
        if not (math.isfinite(self.weight) and self.weight > 0):
            raise ValueError(f"rubric weight must be a finite number > 0, got {self.weight!r}")

    @property
    def signed_weight(self) -> float:
        """The weight with DR Tulu's sign convention: negative for negative rubrics."""
        return self.weight if self.polarity is Polarity.POSITIVE else -self.weight

    def cache_key_payload(self) -> dict[str, Any]:
        """What about this rubric decides its verdict (weight and title do not)."""
        return {"text": self.text, "polarity": self.polarity.value}

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready form (for cache payloads and details)."""
        return {
            "text": self.text,
            "polarity": self.polarity.value,
            "weight": self.weight,
            "title": self.title,
            "source": self.source,
            "category": self.category,
        }


def resolve_polarity_and_weight(
    weight: float | None, polarity: Polarity | None, *, default: Polarity = Polarity.POSITIVE
) -> tuple[Polarity, float]:
    """Turn an input's (weight, polarity) pair into (polarity, weight > 0).

    Rules: an explicit polarity wins; a negative weight without polarity means a negative
    rubric (DR Tulu); a negative weight with ``polarity="negative"`` is accepted (same
    meaning); a negative weight with ``polarity="positive"`` is a contradiction; a weight of
    0 is refused (a rubric that cannot move the reward is almost always a mistake).

    Args:
        weight: The input weight, or None for 1.0.
        polarity: The input polarity, or None.
        default: Polarity when neither says otherwise (the list a rubric came from).

    Returns:
        (polarity, weight) with weight > 0.

    Raises:
        ValueError: For weight 0, a non-finite weight, or a contradiction.

    Examples:
        >>> resolve_polarity_and_weight(-1.0, None)
        (<Polarity.NEGATIVE: 'negative'>, 1.0)
        >>> resolve_polarity_and_weight(None, Polarity.NEGATIVE)
        (<Polarity.NEGATIVE: 'negative'>, 1.0)
    """
    w = 1.0 if weight is None else float(weight)
    if not math.isfinite(w) or w == 0:
        raise ValueError(f"weight must be a finite non-zero number, got {weight!r}")
    if polarity is None:
        return (Polarity.NEGATIVE, -w) if w < 0 else (default, w)
    if w < 0 and polarity is Polarity.POSITIVE:
        raise ValueError(
            "a negative weight contradicts polarity 'positive': give a positive weight, or "
            "polarity 'negative' (the weight is a magnitude, the polarity carries the sign)"
        )
    return polarity, abs(w)
