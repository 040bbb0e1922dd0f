"""LLM backends shared by the verifiers that ask a model (the judge, the citation scorer).

One protocol (:class:`LLMBackend`: a :class:`CompletionRequest` in, a :class:`Completion`
out), an OpenAI-compatible HTTP backend (``tribunal.llm.openai_compat``, aiohttp) and an
in-process transformers backend (``tribunal.llm.transformers_local``, torch), chosen by
:func:`create_backend` from a :class:`BackendConfig`. This package knows nothing of its
callers: a caller passes its own messages, JSON schema and verdict tokens.

Importing this package loads neither aiohttp nor torch; each backend's module does.
"""

from tribunal.llm.base import (
    JSON_TOKEN_PUNCTUATION,
    Completion,
    CompletionRequest,
    LLMBackend,
    NullBackend,
    TokenLogprob,
    not_configured_hint,
)
from tribunal.llm.config import BackendConfig, BackendKind, StructuredOutput
from tribunal.llm.factory import create_backend

__all__ = [
    "JSON_TOKEN_PUNCTUATION",
    "BackendConfig",
    "BackendKind",
    "Completion",
    "CompletionRequest",
    "LLMBackend",
    "NullBackend",
    "StructuredOutput",
    "TokenLogprob",
    "create_backend",
    "not_configured_hint",
]
