"""Settings of the math service (``TRIBUNAL_MATH_*`` plus the core's ``TRIBUNAL_*``)."""

from __future__ import annotations

import os

from pydantic import Field

from tribunal.core.settings import CoreSettings
from tribunal.math.config import MathConfig


class MathSettings(CoreSettings):
    """The math service's settings."""

    math_port: int = Field(default=8101, description="Port of the math API.")
    math_timeout_s: float = Field(
        default=5.0, gt=0, description="Hard deadline per item; the process is killed past it."
    )
    math_processes: int = Field(
        default_factory=lambda: os.cpu_count() or 1,
        ge=1,
        description="Verification processes per worker (default: one per core).",
    )
    math_float_rounding: int = Field(default=6, ge=0, le=15, description="See MathConfig.")
    math_allow_last_number: bool = Field(
        default=True,
        description="Take a completion's last bare number when nothing else marks its answer.",
    )

    def to_config(self) -> MathConfig:
        """The domain configuration these settings describe."""
        return MathConfig(
            float_rounding=self.math_float_rounding, allow_last_number=self.math_allow_last_number
        )
