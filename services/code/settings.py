"""Settings of the code service: the core's ``TRIBUNAL_*`` plus ``TRIBUNAL_CODE_<FIELD>``."""

from __future__ import annotations

from pydantic import Field

from tribunal.code.config import CodeConfig
from tribunal.core.settings import CoreSettings


class CodeServiceConfig(CodeConfig):
    """``TRIBUNAL_CODE_<FIELD>``: every field of ``CodeConfig`` plus the service's port."""

    port: int | None = Field(default=None, description="Port of the code API (default 8102).")

    def config(self) -> CodeConfig:
        """The verifiers' configuration: the ``CodeConfig`` fields of these settings."""
        return CodeConfig.model_validate(self.model_dump(include=set(CodeConfig.model_fields)))


class CodeSettings(CoreSettings):
    """The code service's settings."""

    code: CodeServiceConfig = Field(default_factory=CodeServiceConfig)
