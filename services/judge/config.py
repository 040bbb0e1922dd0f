"""The judge's domain configuration: frozen dataclasses, hashable, built from settings.

Everything here that can move a score is part of :meth:`JudgeConfig.hash_payload` and so of
the verifier's ``config_hash``; secrets (the API key) and pure capacity knobs (concurrency,
cache size) are not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

BackendKind = Literal["openai", "transformers", "none"]
"""Which judge backend scores rubrics; ``none`` means not configured (items fail)."""

Aggregation = Literal["weighted_mean", "dr_tulu"]
"""How rubric scores become one reward (see ``tribunal.judge.scorer``)."""

StructuredOutput = Literal["json_schema", "json_object", "none"]
"""How the openai backend constrains the verdict: a JSON schema (``response_format`` of type
``json_schema``, guided decoding on vLLM / SGLang), JSON mode only, or nothing (prompt only)."""


@dataclass(frozen=True)
class BackendConfig:
    """Where verdicts come from and how calls to it are made.

    Attributes:
        kind: ``openai`` (any OpenAI-compatible chat-completions server), ``transformers``
            (an in-process Hugging Face model, CPU) or ``none``.
        model: Served model name (openai) or local path / hub id (transformers).
        base_url: Server root including ``/v1`` (openai), e.g. ``http://vllm:8000/v1``.
        api_key: Bearer token of the server, or None. Never hashed, never logged.
        max_concurrency: Most calls in flight to this backend at once (a semaphore in front of
            the HTTP client; queued calls wait in the semaphore, never in the connection pool).
        timeout_s: Deadline of one HTTP attempt, seconds.
        max_retries: Extra attempts after a retryable failure (429, 5xx, timeout, connection
            error); other 4xx are never retried.
        backoff_s: First backoff; doubles per attempt, with jitter, capped by ``backoff_max_s``.
            A ``Retry-After`` header from the server wins when it is longer.
        backoff_max_s: Longest single backoff, seconds.
        structured_output: See :data:`StructuredOutput`.
        logprobs: Ask for the log-probabilities of the verdict token (expected score).
        top_logprobs: Alternatives per token to ask for (>= 3 to see every verdict level).
        temperature: Sampling temperature of the verdict call (0 = greedy).
        seed: Sampling seed sent with each call (vLLM honours it), or None.
        chat_template_kwargs: Sent as ``chat_template_kwargs`` (vLLM / SGLang extension; e.g.
            ``{"enable_thinking": false}`` for Qwen3 judges). Empty: not sent (hosted APIs).
        device: Torch device of the transformers backend.
    """

    kind: BackendKind = "none"
    model: str = ""
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    max_concurrency: int = 64
    timeout_s: float = 60.0
    max_retries: int = 3
    backoff_s: float = 0.5
    backoff_max_s: float = 8.0
    structured_output: StructuredOutput = "json_schema"
    logprobs: bool = True
    top_logprobs: int = 5
    temperature: float = 0.0
    seed: int | None = 0
    chat_template_kwargs: tuple[tuple[str, Any], ...] = (("enable_thinking", False),)
    device: str = "cpu"

    def __post_init__(self) -> None:
        if self.max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        if self.timeout_s <= 0:
            raise ValueError("timeout_s must be > 0")
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if self.logprobs and self.top_logprobs < 3:
            raise ValueError("top_logprobs must be >= 3 so that every verdict level is seen")

    def hash_payload(self) -> dict[str, Any]:
        """Return the fields that can move a verdict (no secrets, no capacity knobs)."""
        return {
            "kind": self.kind,
            "model": self.model,
            "structured_output": self.structured_output,
            "logprobs": self.logprobs,
            "temperature": self.temperature,
            "seed": self.seed,
            "chat_template_kwargs": dict(self.chat_template_kwargs),
        }


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
