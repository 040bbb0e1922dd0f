"""The judge's domain configuration: a frozen pydantic model, hashable, defaults here only.

Everything here that can move a score is part of :meth:`JudgeConfig.hash_payload` and so of
the verifier's ``config_hash``; secrets (the API key) and pure capacity knobs (concurrency,
cache size) are not. The service's settings (``tribunal.judge.settings``) extend it, so that
every field is also ``TRIBUNAL_JUDGE_<FIELD>``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tribunal.llm.config import BackendConfig

Aggregation = Literal["weighted_mean", "dr_tulu"]
"""How rubric scores become one reward (see ``tribunal.judge.scorer``)."""


class JudgeConfig(BaseModel):
    """Domain configuration of the rubric judge (each field documents itself)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: BackendConfig = Field(
        default_factory=BackendConfig, description="Where verdicts come from (tribunal.llm)."
    )
    rubrics_per_call: int = Field(
        default=1,
        ge=1,
        le=32,
        description="Rubrics asked in one model call (1: one call per rubric; k > 1: the "
        "rubrics of one response in chunks of k, one JSON verdict per rubric).",
    )
    aggregation: Aggregation = Field(
        default="weighted_mean",
        description="weighted_mean (reward in [0, 1]) or dr_tulu (Σ s·w / Σ_{w>0} w with "
        "signed weights, clipped to [0, 1]).",
    )
    default_rubric_sets: tuple[str, ...] = Field(
        default=(),
        description="Static sets added to an item that does not name its own rubric_sets "
        "(JSON list; empty: instance rubrics only).",
    )
    max_reason_chars: int = Field(
        default=300,
        ge=1,
        description="Longest reason the judge may write per rubric (schema maxLength).",
    )
    max_tokens_per_rubric: int = Field(
        default=160, ge=1, description="Completion budget per rubric of a call (reason + JSON)."
    )
    cache_max_items: int = Field(
        default=100_000, ge=0, description="Verdicts kept in the in-process LRU (0: off)."
    )
    parse_retries: int = Field(
        default=1, ge=0, description="Extra calls for rubrics whose verdict could not be read."
    )

    @model_validator(mode="after")
    def _every_level_seen(self) -> JudgeConfig:
        if self.backend.logprobs and self.backend.top_logprobs < 3:
            raise ValueError("top_logprobs must be >= 3 so that every verdict level is seen")
        return self

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
