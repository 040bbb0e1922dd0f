"""Domain configuration of the citation verifier: one frozen pydantic model, defaults here.

Everything that can move a reward is in :meth:`CitationConfig.hash_payload` and so in the
verifier's ``config_hash``; capacity knobs (cache size, the size limits, which refuse an item
rather than change its reward) are not. The service's settings
(``tribunal.citation.settings``) extend it, so that every field is ``TRIBUNAL_CITATION_*``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tribunal.citation.lexical import LexicalThresholds
from tribunal.citation.scorer import PRESETS, Preset
from tribunal.wire.citation import PresetName, SupportMode


class CitationConfig(BaseModel):
    """How citations are checked and scored (each field documents itself)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    support: SupportMode = Field(
        default="lexical",
        description="Support mode used when an item does not choose one: judge | lexical | none.",
    )
    preset: PresetName = Field(
        default="tribunal",
        description="Reward formula used when an item does not choose one: tribunal (gate · "
        "mean claim F1) | dr_tulu (0.6·F1 + 0.4·valid id share).",
    )
    f1_weight: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="Overrides the tribunal preset's F1 weight (null: 1.0).",
    )
    valid_id_weight: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="Overrides the tribunal preset's valid-id weight (null: 0.0); the two "
        "weights must sum to 1. The dr_tulu preset stays as published.",
    )
    lexical: LexicalThresholds = Field(
        default_factory=LexicalThresholds, description="Thresholds of the lexical mode."
    )
    max_claims: int = Field(
        default=256,
        ge=1,
        description="Most claims (cited, and uncited sentences) one answer may hold; an answer "
        "with more is refused (bad_input naming max_claims).",
    )
    max_ids_per_claim: int = Field(
        default=32,
        ge=1,
        description="Most distinct ids one citation tag may list; more is refused (bad_input "
        "naming max_ids_per_claim).",
    )
    max_distinct_ids: int = Field(
        default=512,
        ge=1,
        description="Most distinct ids one answer may cite; more is refused (bad_input naming "
        "max_distinct_ids).",
    )

    @model_validator(mode="after")
    def _weights_sum_to_one(self) -> CitationConfig:
        self.preset_named("tribunal")  # weights are checked here, at start-up
        return self

    def preset_named(self, name: PresetName) -> Preset:
        """Return the preset ``name`` with this configuration's weight overrides.

        Raises:
            ValueError: The overridden weights do not sum to 1.
        """
        preset = PRESETS[name]
        if name != "tribunal" or (self.f1_weight is None and self.valid_id_weight is None):
            return preset
        f1 = self.f1_weight if self.f1_weight is not None else 1.0 - (self.valid_id_weight or 0.0)
        valid = self.valid_id_weight if self.valid_id_weight is not None else 1.0 - f1
        return replace(preset, f1_weight=f1, valid_id_weight=valid)

    def hash_payload(self) -> dict[str, Any]:
        """Return everything that can move a reward, for ``config_hash``."""
        tribunal = self.preset_named("tribunal")
        return {
            "support": self.support,
            "preset": self.preset,
            "weights": [tribunal.f1_weight, tribunal.valid_id_weight],
            "lexical": [self.lexical.full, self.lexical.partial, self.lexical.relevant],
        }
