"""Settings of the judge service: the core's ``TRIBUNAL_*`` plus ``TRIBUNAL_JUDGE_<FIELD>``."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, model_validator
from pydantic_settings import NoDecode

from tribunal.core.settings import CoreSettings
from tribunal.judge.config import JudgeConfig
from tribunal.llm.config import BackendConfig, gather_backend


class JudgeServiceConfig(JudgeConfig):
    """``TRIBUNAL_JUDGE_<FIELD>``: every field of ``JudgeConfig`` and of its backend group
    (``BackendConfig``) plus the service's port.

    The backend's fields are written flat (``TRIBUNAL_JUDGE_BASE_URL``, not ``..._BACKEND_``)
    and gathered into ``backend``; ``TRIBUNAL_JUDGE_BACKEND`` names its kind
    (``tribunal.llm.config.gather_backend``: the kind and model when unset).
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
        data["backend"] = gather_backend(data)
        return data

    def config(self) -> JudgeConfig:
        """The verifier's configuration: the ``JudgeConfig`` fields of these settings."""
        return JudgeConfig(**{name: getattr(self, name) for name in JudgeConfig.model_fields})


class JudgeSettings(CoreSettings):
    """The judge service's settings."""

    judge: JudgeServiceConfig = Field(default_factory=JudgeServiceConfig)
