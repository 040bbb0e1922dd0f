"""``BackendConfig``: which LLM answers and how it is called (kind, model, server, retries).

A frozen dataclass, hashable; the service that owns a backend builds it from its settings
(the judge from ``TRIBUNAL_JUDGE_*``). :meth:`BackendConfig.hash_payload` lists what can move
an answer, for the caller's ``config_hash``; secrets and capacity knobs are left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

BackendKind = Literal["openai", "transformers", "none"]
"""Which backend answers: any OpenAI-compatible server, an in-process transformers model, or
``none`` (not configured: every call fails with ``backend_unavailable``)."""

StructuredOutput = Literal["json_schema", "json_object", "none"]
"""How the openai backend constrains the answer: a JSON schema (``response_format`` of type
``json_schema``, guided decoding on vLLM / SGLang), JSON mode only, or nothing (prompt only)."""


@dataclass(frozen=True)
class BackendConfig:
    """Which model answers and how calls to it are made (frozen, hashable).

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
        top_logprobs: Alternatives per token to ask for (a caller with k verdict levels needs
            at least k).
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
        if self.logprobs and self.top_logprobs < 1:
            raise ValueError("top_logprobs must be >= 1")

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
