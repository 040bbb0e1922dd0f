"""Judge backends: OpenAI-compatible HTTP servers and an in-process transformers model.

``transformers_local`` imports torch only inside its ``start()``; nothing here imports it,
so a judge service without that backend never loads torch.
"""

from __future__ import annotations

from tribunal.judge.backends.base import (
    NOT_CONFIGURED_HINT,
    Completion,
    CompletionRequest,
    JudgeBackend,
    NullBackend,
    TokenLogprob,
)
from tribunal.judge.backends.openai_compat import OpenAICompatBackend
from tribunal.judge.config import BackendConfig

__all__ = [
    "NOT_CONFIGURED_HINT",
    "Completion",
    "CompletionRequest",
    "JudgeBackend",
    "NullBackend",
    "OpenAICompatBackend",
    "TokenLogprob",
    "create_backend",
]


def create_backend(config: BackendConfig) -> JudgeBackend:
    """Build the backend ``config`` names; a missing required setting gives a ``NullBackend``
    whose errors say which setting to add."""
    if config.kind == "openai":
        if not config.base_url:
            return NullBackend(
                config.model,
                "TRIBUNAL_JUDGE_BACKEND=openai needs TRIBUNAL_JUDGE_BASE_URL "
                "(e.g. http://127.0.0.1:8000/v1)",
            )
        return OpenAICompatBackend(config)
    if config.kind == "transformers":
        if not config.model:
            return NullBackend(
                "", "TRIBUNAL_JUDGE_BACKEND=transformers needs TRIBUNAL_JUDGE_MODEL=<model path>"
            )
        from tribunal.judge.backends.transformers_local import TransformersBackend

        return TransformersBackend(config)
    return NullBackend(config.model)
