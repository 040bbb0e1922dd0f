"""Settings of the math service: the core's ``TRIBUNAL_*`` plus ``TRIBUNAL_MATH_<FIELD>``."""

from __future__ import annotations

from pydantic import Field, ValidationInfo, field_validator

from tribunal.core.layout import cores_per_worker, default_workers
from tribunal.core.settings import CoreSettings
from tribunal.math.config import MathConfig


class MathServiceConfig(MathConfig):
    """``TRIBUNAL_MATH_<FIELD>``: every field of ``MathConfig`` plus how the service runs it
    (none of which can move a reward, so none is hashed)."""

    port: int | None = Field(default=None, description="Port of the math API (default 8101).")
    timeout_s: float = Field(
        default=5.0, gt=0, description="Hard deadline per item; the process is killed past it."
    )
    workers: int = Field(
        default_factory=default_workers,
        ge=1,
        description="Worker processes `tribunal worker math` runs (default: one per 4 cores, "
        "rounded up).",
    )
    processes: int = Field(
        default=0,
        ge=0,
        validate_default=True,
        description="Verification processes per worker; 0 = the cores shared out among the "
        "workers (rounded up).",
    )

    @field_validator("processes")
    @classmethod
    def _zero_shares_the_cores(cls, processes: int, info: ValidationInfo) -> int:
        # ``workers`` is declared first, so it is validated by now (absent if it failed).
        return processes or cores_per_worker(info.data.get("workers", 1))

    def config(self) -> MathConfig:
        """The verifier's configuration: the ``MathConfig`` fields of these settings."""
        return MathConfig.model_validate(self.model_dump(include=set(MathConfig.model_fields)))


class MathSettings(CoreSettings):
    """The math service's settings."""

    math: MathServiceConfig = Field(default_factory=MathServiceConfig)
