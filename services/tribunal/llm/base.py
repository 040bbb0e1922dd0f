"""The LLM backend protocol: one chat completion in, text and verdict log-probabilities out.

A backend knows nothing about its caller (the judge's rubrics, the citation scorer's
claims): it sends a :class:`CompletionRequest` (chat messages, a JSON schema, a token
budget, the verdict tokens whose log-probabilities matter) and returns a
:class:`Completion`; the caller reads its verdicts from it. Backends raise the
``TribunalError`` classes, never bare exceptions:

- ``BackendUnavailable`` (retryable): unreachable, 429 or 5xx after retries, not configured.
- ``ScoringTimeout`` (retryable): every attempt overran its deadline.
- ``Refusal``: the model or its provider refused (content filter, ``refusal`` field).
- ``BadInput``: the prompt does not fit the model's context.
- ``ConfigurationError``: the server rejects the request itself (wrong key, model, params).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from tribunal.wire.errors import BackendUnavailable

JSON_TOKEN_PUNCTUATION = ' \t\n\r":,{}'
"""What may surround a verdict value inside one token (' 2', ':2', '"2'): stripped to find it."""


@dataclass(frozen=True)
class CompletionRequest:
    """One model call.

    Attributes:
        messages: OpenAI chat ``messages`` (``{"role", "content"}`` each), in order.
        schema: JSON schema of the answer: an object whose properties are the verdict keys,
            each an object with one ``enum`` property (the verdict) and string properties
            (reasons). The openai backend sends it as ``response_format``; the transformers
            backend writes that JSON itself and lets the model choose only the verdicts.
        max_tokens: Completion budget, tokens.
        verdict_tokens: The verdict values as written in the answer (``("0", "1", "2")``):
            the tokens whose log-probabilities matter. The openai backend keeps a token's
            alternatives only where the token is one of them; the transformers backend
            restricts the next-token distribution to them (each must be one token).
        schema_name: Name of the schema in ``response_format`` (OpenAI requires one).
        temperature: Overrides the backend's temperature (retries use a small positive one).
        seed: Overrides the backend's seed.
    """

    messages: Sequence[Mapping[str, str]]
    schema: Mapping[str, Any]
    max_tokens: int
    verdict_tokens: tuple[str, ...] = ()
    schema_name: str = "verdicts"
    temperature: float | None = None
    seed: int | None = None


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token with its log-probability and the alternatives the server gave."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Completion:
    """What a backend answered.

    Attributes:
        text: The message content ('' when the model produced none).
        finish_reason: ``stop``, ``length``, ``content_filter`` ... or None.
        tokens: Per-token log-probabilities when the backend returns them, else None.
        prompt_tokens: Prompt tokens billed (0 when unknown).
        completion_tokens: Completion tokens billed (0 when unknown).
        refusal: The provider's refusal text (OpenAI structured outputs), or None.
    """

    text: str
    finish_reason: str | None = None
    tokens: tuple[TokenLogprob, ...] | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    refusal: str | None = None


@runtime_checkable
class LLMBackend(Protocol):
    """A source of chat completions with its own concurrency limit."""

    kind: str
    model: str

    @property
    def control_tokens(self) -> tuple[str, ...]:
        """Control tokens of the model's chat template that this backend knows beyond the
        common families' (``tribunal.llm.untrusted``): the configured ones, and after
        :meth:`start` its tokenizer's where it has one."""
        ...

    async def start(self) -> None:
        """Open clients or load the model."""
        ...

    async def aclose(self) -> None:
        """Release what ``start`` acquired."""
        ...

    async def complete(self, request: CompletionRequest) -> Completion:
        """Run one call (with the backend's own retries); raise a ``TribunalError``."""
        ...


def not_configured_hint(env_prefix: str) -> str:
    """Return the message of a backend with nothing configured, naming the settings to set.

    Args:
        env_prefix: The service's variable prefix for its backend, e.g. ``TRIBUNAL_JUDGE_``.
    """
    p = env_prefix
    return (
        f"no LLM backend is configured: set {p}BACKEND=openai with {p}BASE_URL "
        f"(e.g. http://127.0.0.1:8000/v1) and {p}MODEL, or "
        f"{p}BACKEND=transformers with {p}MODEL=<local model path>"
    )


class NullBackend:
    """The backend of a service with nothing configured: every call is ``backend_unavailable``.

    The service still starts (health checks, OpenAPI, other endpoints work); each item
    comes back with an error whose message says how to configure a backend.

    Args:
        model: Model name to report.
        reason: The error message of every call (see :func:`not_configured_hint`).
    """

    kind = "none"

    def __init__(self, model: str, reason: str) -> None:
        self.model = model
        self.reason = reason

    @property
    def control_tokens(self) -> tuple[str, ...]:
        """None: no model is ever asked."""
        return ()

    async def start(self) -> None:
        """Nothing to open."""

    async def aclose(self) -> None:
        """Nothing to close."""

    async def complete(self, request: CompletionRequest) -> Completion:
        """Raise ``BackendUnavailable`` with the configuration hint."""
        raise BackendUnavailable(self.reason)
