"""Settings of the citation service (``TRIBUNAL_CITATION_*`` plus the core's ``TRIBUNAL_*``)."""

from __future__ import annotations

from pydantic import Field

from tribunal.citation.config import CitationConfig
from tribunal.citation.lexical import LexicalThresholds
from tribunal.citation.schemas import SupportMode
from tribunal.citation.scorer import PresetName
from tribunal.core.settings import CoreSettings


class CitationSettings(CoreSettings):
    """The citation service's settings (env ``TRIBUNAL_CITATION_<FIELD>``)."""

    citation_port: int = Field(default=8104, description="Port of the citation API.")
    citation_support: SupportMode | None = Field(
        default=None,
        description="Default support mode: judge | lexical | none. Unset: judge when an LLM "
        "backend is configured, else lexical.",
    )
    citation_preset: PresetName = Field(
        default="tribunal",
        description="Default reward formula: tribunal (gate · mean claim F1) | dr_tulu "
        "(0.6·F1 + 0.4·valid id share).",
    )
    citation_f1_weight: float | None = Field(
        default=None, ge=0, le=1, description="F1 weight of the tribunal preset (default 1.0)."
    )
    citation_valid_id_weight: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="Valid-id-share weight of the tribunal preset (default 0.0); the two "
        "weights must sum to 1.",
    )
    citation_lexical_full: float = Field(
        default=0.8, ge=0, le=1, description="Lexical coverage for 'supported'."
    )
    citation_lexical_partial: float = Field(
        default=0.5, ge=0, le=1, description="Lexical coverage for 'partial'."
    )
    citation_lexical_relevant: float = Field(
        default=0.3, ge=0, le=1, description="Lexical coverage of one snippet for 'relevant'."
    )

    def has_backend(self) -> bool:
        """Whether an LLM backend for the judge mode is configured."""
        return False

    def to_config(self) -> CitationConfig:
        """The domain configuration these settings describe."""
        support = self.citation_support or ("judge" if self.has_backend() else "lexical")
        return CitationConfig(
            support=support,
            preset=self.citation_preset,
            f1_weight=self.citation_f1_weight,
            valid_id_weight=self.citation_valid_id_weight,
            lexical=LexicalThresholds(
                full=self.citation_lexical_full,
                partial=self.citation_lexical_partial,
                relevant=self.citation_lexical_relevant,
            ),
        )
