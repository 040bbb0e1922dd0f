"""Settings of the math service: the core's ``TRIBUNAL_*`` plus ``TRIBUNAL_MATH_<FIELD>``."""

from __future__ import annotations

import os

from pydantic import Field

from tribunal.core.settings import CoreSettings
from tribunal.math.config import MathConfig


def _cores() -> int:
    return os.cpu_count() or 1


class MathServiceConfig(MathConfig):
    """``TRIBUNAL_MATH_<FIELD>``: every field of ``MathConfig`` plus how the service runs it
    (none of which can move a reward, so none is hashed)."""

    port: int | None = Field(default=None, description="Port of the math API (default 8101).")
    timeout_s: float = Field(
        default=5.0, gt=0, description="Hard deadline per item; the process is killed past it."
    )
    processes: int = Field(
        default_factory=_cores,
        ge=1,
        description="Verification processes per worker (default: one per core).",
    )

    def config(self) -> MathConfig:
        """The verifier's configuration: the ``MathConfig`` fields of these settings."""
        return MathConfig.model_validate(self.model_dump(include=set(MathConfig.model_fields)))


class MathSettings(CoreSettings):
    """The math service's settings."""

    math: MathServiceConfig = Field(default_factory=MathServiceConfig)
