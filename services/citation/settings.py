"""Settings of the citation service (``TRIBUNAL_CITATION_*`` plus the core's ``TRIBUNAL_*``)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, SecretStr

from tribunal.citation.config import CitationConfig
from tribunal.citation.judge import JudgeSettings
from tribunal.citation.lexical import LexicalThresholds
from tribunal.citation.schemas import SupportMode
from tribunal.citation.scorer import PresetName
from tribunal.core.settings import CoreSettings
from tribunal.llm import BackendConfig, BackendKind, StructuredOutput

DEFAULT_OPENAI_MODEL = "Qwen/Qwen3.5-35B-A3B"
"""The judge's default model (``tribunal.judge.settings``; a verifier never imports another,
so ``tests/citation/test_settings.py`` checks that the two agree)."""


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

    citation_backend: BackendKind | None = Field(
        default=None,
        description="LLM backend of the judge mode: openai | transformers | none. Unset: "
        "openai when citation_base_url is set, else none.",
    )
    citation_base_url: str | None = Field(
        default=None, description="OpenAI-compatible root incl. /v1, e.g. http://vllm:8000/v1."
    )
    citation_model: str | None = Field(
        default=None,
        description=f"Served model name (openai; default the judge's, {DEFAULT_OPENAI_MODEL}) "
        "or local model path (transformers).",
    )
    citation_api_key: SecretStr | None = Field(default=None, description="Bearer key.")
    citation_max_concurrency: int = Field(default=64, ge=1, description="Model calls in flight.")
    citation_timeout_s: float = Field(default=60.0, gt=0, description="Deadline of one call.")
    citation_max_retries: int = Field(
        default=3, ge=0, description="Retries on 429 / 5xx / timeout / connection error."
    )
    citation_structured_output: StructuredOutput = Field(
        default="json_schema", description="json_schema | json_object | none."
    )
    citation_temperature: float = Field(default=0.0, ge=0, description="Sampling temperature.")
    citation_chat_template_kwargs: dict[str, Any] = Field(
        default_factory=lambda: {"enable_thinking": False},
        description="Sent as chat_template_kwargs (vLLM / SGLang); {} for hosted APIs.",
    )
    citation_device: str = Field(default="cpu", description="Torch device (transformers).")
    citation_claims_per_call: int = Field(
        default=8, ge=1, le=64, description="Claims of one answer judged in one model call."
    )
    citation_cache_max_items: int = Field(
        default=100_000, ge=0, description="Claim judgments kept in the in-process LRU (0: off)."
    )

    def backend_config(self) -> BackendConfig:
        """The judge mode's LLM backend (the judge's model unless another is named)."""
        kind = self.citation_backend or ("openai" if self.citation_base_url else "none")
        model = self.citation_model or (DEFAULT_OPENAI_MODEL if kind == "openai" else "")
        return BackendConfig(
            kind=kind,
            model=model,
            base_url=self.citation_base_url,
            api_key=self.citation_api_key.get_secret_value() if self.citation_api_key else None,
            max_concurrency=self.citation_max_concurrency,
            timeout_s=self.citation_timeout_s,
            max_retries=self.citation_max_retries,
            structured_output=self.citation_structured_output,
            logprobs=False,  # hard verdicts: recall levels and relevance are categorical
            temperature=self.citation_temperature,
            chat_template_kwargs=tuple(sorted(self.citation_chat_template_kwargs.items())),
            device=self.citation_device,
        )

    def judge_settings(self) -> JudgeSettings:
        """Batching and cache settings of the judge mode."""
        return JudgeSettings(
            claims_per_call=self.citation_claims_per_call,
            cache_max_items=self.citation_cache_max_items,
        )

    def has_backend(self) -> bool:
        """Whether an LLM backend for the judge mode is configured."""
        return self.backend_config().kind != "none"

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
