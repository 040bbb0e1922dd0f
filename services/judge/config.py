"""The judge's domain configuration: frozen dataclasses, hashable, built from settings.

Everything here that can move a score is part of :meth:`JudgeConfig.hash_payload` and so of
the verifier's ``config_hash``; secrets (the API key) and pure capacity knobs (concurrency,
cache size) are not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from tribunal.llm.config import BackendConfig

Aggregation = Literal["weighted_mean", "dr_tulu"]
"""How rubric scores become one reward (see ``tribunal.judge.scorer``)."""


@dataclass(frozen=True)
class JudgeConfig:
    """Domain configuration of the rubric judge.

    Attributes:
        backend: See :class:`BackendConfig`.
        rubrics_per_call: Rubrics asked in one model call (1: one call per rubric; k > 1: the
            rubrics of one response in chunks of k, one JSON verdict per rubric).
        aggregation: ``weighted_mean`` (default, reward in [0, 1]) or ``dr_tulu``
            (``Σ s·w / Σ_{w>0} w`` with signed weights, clipped to [0, 1]).
        default_rubric_sets: Static sets added to an item that does not name its own
            ``rubric_sets`` (empty: instance rubrics only).
        max_reason_chars: Longest reason the judge may write per rubric (schema ``maxLength``).
        max_tokens_per_rubric: Completion budget per rubric of a call (reason + JSON).
        cache_max_items: Verdicts kept in the in-process LRU (0 disables it).
        parse_retries: Extra calls for rubrics whose verdict could not be read.
    """

    backend: BackendConfig = field(default_factory=BackendConfig)
    rubrics_per_call: int = 1
    aggregation: Aggregation = "weighted_mean"
    default_rubric_sets: tuple[str, ...] = ()
    max_reason_chars: int = 300
    max_tokens_per_rubric: int = 160
    cache_max_items: int = 100_000
    parse_retries: int = 1

    def __post_init__(self) -> None:
        if not 1 <= self.rubrics_per_call <= 32:
            raise ValueError("rubrics_per_call must be in [1, 32]")
        if self.max_reason_chars < 1:
            raise ValueError("max_reason_chars must be >= 1")
        if self.parse_retries < 0:
            raise ValueError("parse_retries must be >= 0")
        if self.backend.logprobs and self.backend.top_logprobs < 3:
            raise ValueError("top_logprobs must be >= 3 so that every verdict level is seen")

    def hash_payload(self) -> dict[str, Any]:
        """Return everything that can move a score, for ``config_hash``."""
        return {
            "backend": self.backend.hash_payload(),
            "rubrics_per_call": self.rubrics_per_call,
            "aggregation": self.aggregation,
            "default_rubric_sets": list(self.default_rubric_sets),
            "max_reason_chars": self.max_reason_chars,
            "max_tokens_per_rubric": self.max_tokens_per_rubric,
        }
