"""The judge backend protocol: one chat completion in, text and verdict log-probabilities out.

A backend knows nothing about rubrics: it sends a :class:`CompletionRequest` (messages, a
JSON schema, a token budget) and returns a :class:`Completion`; ``tribunal.judge.verdict``
reads verdicts from it. Backends raise the ``TribunalError`` classes, never bare
exceptions:

- ``BackendUnavailable`` (retryable): unreachable, 429 or 5xx after retries, not configured.
- ``ScoringTimeout`` (retryable): every attempt overran its deadline.
- ``Refusal``: the model or its provider refused (content filter, ``refusal`` field).
- ``BadInput``: the prompt does not fit the judge model's context.
- ``ConfigurationError``: the server rejects the request itself (wrong key, model, params).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from tribunal.core.errors import BackendUnavailable
from tribunal.judge.prompts import JudgePrompt


@dataclass(frozen=True)
class CompletionRequest:
    """One judge call.

    Attributes:
        prompt: Messages and verdict keys.
        schema: JSON schema of the answer (``tribunal.judge.prompts.verdict_schema``).
        max_tokens: Completion budget, tokens.
        temperature: Overrides the backend's temperature (retries use a small positive one).
        seed: Overrides the backend's seed.
    """

    prompt: JudgePrompt
    schema: dict[str, Any]
    max_tokens: int
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
class JudgeBackend(Protocol):
    """A source of judge completions with its own concurrency limit."""

    kind: str
    model: str

    async def start(self) -> None:
        """Open clients or load the model."""
        ...

    async def aclose(self) -> None:
        """Release what ``start`` acquired."""
        ...

    async def complete(self, request: CompletionRequest) -> Completion:
        """Run one call (with the backend's own retries); raise a ``TribunalError``."""
        ...


NOT_CONFIGURED_HINT = (
    "no judge backend is configured: set TRIBUNAL_JUDGE_BACKEND=openai with "
    "TRIBUNAL_JUDGE_BASE_URL (e.g. http://127.0.0.1:8000/v1) and TRIBUNAL_JUDGE_MODEL, or "
    "TRIBUNAL_JUDGE_BACKEND=transformers with TRIBUNAL_JUDGE_MODEL=<local model path>"
)


class NullBackend:
    """The backend of a judge with nothing configured: every call is ``backend_unavailable``.

    The service still starts (health checks, OpenAPI, other endpoints work); each item
    comes back with an error whose message says how to configure a backend.
    """

    kind = "none"

    def __init__(self, model: str = "", reason: str = NOT_CONFIGURED_HINT) -> None:
        self.model = model
        self.reason = reason

    async def start(self) -> None:
        """Nothing to open."""

    async def aclose(self) -> None:
        """Nothing to close."""

    async def complete(self, request: CompletionRequest) -> Completion:
        """Raise ``BackendUnavailable`` with the configuration hint."""
        raise BackendUnavailable(self.reason)
