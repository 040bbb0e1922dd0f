"""Settings of the judge service: the core's ``TRIBUNAL_*`` plus ``TRIBUNAL_JUDGE_<FIELD>``."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, model_validator
from pydantic_settings import NoDecode

from tribunal.core.settings import CoreSettings
from tribunal.judge.config import JudgeConfig
from tribunal.llm.config import BackendConfig

DEFAULT_OPENAI_MODEL = "Qwen/Qwen3.5-35B-A3B"
"""The judge model the compose stack serves when ``TRIBUNAL_JUDGE_MODEL`` is not set."""


class JudgeServiceConfig(JudgeConfig):
    """``TRIBUNAL_JUDGE_<FIELD>``: every field of ``JudgeConfig`` and of its backend group
    (``BackendConfig``) plus the service's port.

    The backend's fields are written flat (``TRIBUNAL_JUDGE_BASE_URL``, not ``..._BACKEND_``)
    and gathered into ``backend``; ``TRIBUNAL_JUDGE_BACKEND`` names its kind. An unset kind is
    ``openai`` when a base URL is given, else ``none``; an openai backend without a model
    serves ``DEFAULT_OPENAI_MODEL``.
    """

    port: int | None = Field(default=None, description="Port of the judge API (default 8103).")
    # The same field as JudgeConfig's; NoDecode because TRIBUNAL_JUDGE_BACKEND is its kind
    # (a word), not a JSON object.
    backend: Annotated[BackendConfig, NoDecode] = Field(
        default_factory=BackendConfig, description=JudgeConfig.model_fields["backend"].description
    )

    @model_validator(mode="before")
    @classmethod
    def _gather_backend(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        backend = data.pop("backend", None)
        if isinstance(backend, BackendConfig):
            nested = {name: getattr(backend, name) for name in BackendConfig.model_fields}
        elif isinstance(backend, dict):
            nested = dict(backend)
        else:
            nested = {} if backend is None else {"kind": backend}
        for name in BackendConfig.model_fields:
            if name in data:
                nested[name] = data.pop(name)
        if nested.get("kind") is None:
            nested["kind"] = "openai" if nested.get("base_url") else "none"
        if nested["kind"] == "openai" and not nested.get("model"):
            nested["model"] = DEFAULT_OPENAI_MODEL
        data["backend"] = nested
        return data

    def config(self) -> JudgeConfig:
        """The verifier's configuration: the ``JudgeConfig`` fields of these settings."""
        return JudgeConfig(**{name: getattr(self, name) for name in JudgeConfig.model_fields})


class JudgeSettings(CoreSettings):
    """The judge service's settings."""

    judge: JudgeServiceConfig = Field(default_factory=JudgeServiceConfig)
