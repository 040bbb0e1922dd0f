"""``create_backend``: the backend a :class:`~tribunal.llm.config.BackendConfig` names.

The openai backend (aiohttp) and the transformers backend (torch, inside its ``start()``)
are imported here only when chosen, so a service without them never loads them.
"""

from __future__ import annotations

from tribunal.llm.base import LLMBackend, NullBackend, not_configured_hint
from tribunal.llm.config import BackendConfig


def create_backend(config: BackendConfig, env_prefix: str = "TRIBUNAL_LLM_") -> LLMBackend:
    """Build the backend ``config`` names.

    Args:
        config: Kind, model, server and call settings.
        env_prefix: The calling service's variable prefix (``TRIBUNAL_JUDGE_``): error
            messages of a backend that is not configured name the variables to set.

    Returns:
        The backend, not yet started; a :class:`NullBackend` whose errors say which setting
        to add when a required one is missing or ``kind`` is ``none``.
    """
    p = env_prefix
    if config.kind == "openai":
        if not config.base_url:
            return NullBackend(
                config.model,
                f"{p}BACKEND=openai needs {p}BASE_URL (e.g. http://127.0.0.1:8000/v1)",
            )
        from tribunal.llm.openai_compat import OpenAICompatBackend

        return OpenAICompatBackend(config)
    if config.kind == "transformers":
        if not config.model:
            return NullBackend("", f"{p}BACKEND=transformers needs {p}MODEL=<model path>")
        from tribunal.llm.transformers_local import TransformersBackend

        return TransformersBackend(config)
    return NullBackend(config.model, not_configured_hint(p))
