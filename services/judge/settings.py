"""``JudgeSettings``: the judge service's ``TRIBUNAL_JUDGE_*`` environment, and its config."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, SecretStr

from tribunal.core.settings import CoreSettings
from tribunal.judge.config import Aggregation, JudgeConfig
from tribunal.llm.config import BackendConfig, StructuredOutput

DEFAULT_OPENAI_MODEL = "Qwen/Qwen3.5-35B-A3B"
"""The judge model the compose stack serves when ``TRIBUNAL_JUDGE_MODEL`` is not set."""


class JudgeSettings(CoreSettings):
    """Core settings plus the judge's own (env ``TRIBUNAL_JUDGE_<FIELD>``)."""

    judge_port: int = Field(default=8103, description="Port of the judge API.")
    judge_backend: Literal["openai", "transformers", "none"] | None = Field(
        default=None,
        description=(
            "openai (any OpenAI-compatible server) | transformers (in-process, CPU) | none. "
            "Unset: openai when judge_base_url is set, else none (items get "
            "backend_unavailable)."
        ),
    )
    judge_base_url: str | None = Field(
        default=None, description="OpenAI-compatible root incl. /v1, e.g. http://vllm:8000/v1."
    )
    judge_model: str | None = Field(
        default=None,
        description=(
            f"Served model name (openai; default {DEFAULT_OPENAI_MODEL}) or local model path "
            "(transformers)."
        ),
    )
    judge_api_key: SecretStr | None = Field(default=None, description="Bearer key of the server.")
    judge_max_concurrency: int = Field(default=64, ge=1, description="Judge calls in flight.")
    judge_timeout_s: float = Field(default=60.0, gt=0, description="Deadline of one attempt.")
    judge_max_retries: int = Field(
        default=3, ge=0, description="Retries on 429 / 5xx / timeout / connection error."
    )
    judge_backoff_s: float = Field(default=0.5, ge=0, description="First retry backoff.")
    judge_rubrics_per_call: int = Field(
        default=1, ge=1, le=32, description="1: one call per rubric; k: k rubrics per call."
    )
    judge_aggregation: Aggregation = Field(
        default="weighted_mean", description="weighted_mean | dr_tulu (Σ s·w / Σ_{w>0} w)."
    )
    judge_default_rubric_sets: list[str] = Field(
        default_factory=list,
        description="Static sets added to items that do not name `rubric_sets` (JSON list).",
    )
    judge_structured_output: StructuredOutput = Field(
        default="json_schema", description="json_schema | json_object | none."
    )
    judge_logprobs: bool = Field(
        default=True, description="Ask for verdict-token log-probabilities (expected score)."
    )
    judge_top_logprobs: int = Field(default=5, ge=3, le=20, description="Alternatives per token.")
    judge_temperature: float = Field(default=0.0, ge=0, description="Verdict sampling temperature.")
    judge_chat_template_kwargs: dict[str, Any] = Field(
        default_factory=lambda: {"enable_thinking": False},
        description="Sent as chat_template_kwargs (vLLM / SGLang); {} for hosted APIs.",
    )
    judge_cache_max_items: int = Field(
        default=100_000, ge=0, description="Verdicts kept in the in-process LRU (0: off)."
    )
    judge_device: str = Field(default="cpu", description="Torch device (transformers backend).")

    def to_config(self) -> JudgeConfig:
        """Build the judge's domain configuration."""
        kind = self.judge_backend or ("openai" if self.judge_base_url else "none")
        model = self.judge_model or (DEFAULT_OPENAI_MODEL if kind == "openai" else "")
        backend = BackendConfig(
            kind=kind,
            model=model,
            base_url=self.judge_base_url,
            api_key=self.judge_api_key.get_secret_value() if self.judge_api_key else None,
            max_concurrency=self.judge_max_concurrency,
            timeout_s=self.judge_timeout_s,
            max_retries=self.judge_max_retries,
            backoff_s=self.judge_backoff_s,
            structured_output=self.judge_structured_output,
            logprobs=self.judge_logprobs,
            top_logprobs=self.judge_top_logprobs,
            temperature=self.judge_temperature,
            chat_template_kwargs=tuple(sorted(self.judge_chat_template_kwargs.items())),
            device=self.judge_device,
        )
        return JudgeConfig(
            backend=backend,
            rubrics_per_call=self.judge_rubrics_per_call,
            aggregation=self.judge_aggregation,
            default_rubric_sets=tuple(self.judge_default_rubric_sets),
            cache_max_items=self.judge_cache_max_items,
        )
