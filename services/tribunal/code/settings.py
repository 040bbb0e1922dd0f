"""Settings of the code service: the core's ``TRIBUNAL_*`` plus ``TRIBUNAL_CODE_<FIELD>``."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from tribunal.code.config import CodeConfig
from tribunal.core.layout import cores_per_worker, default_workers
from tribunal.core.settings import CoreSettings


class CodeServiceConfig(CodeConfig):
    """``TRIBUNAL_CODE_<FIELD>``: every field of ``CodeConfig`` plus how the service runs
    (its port, its worker processes). ``slots`` 0 here means the cores shared out among the
    workers, not every core."""

    port: int | None = Field(default=None, description="Port of the code API (default 8102).")
    workers: int = Field(
        default_factory=default_workers,
        ge=1,
        description="Worker processes `tribunal worker code` runs (default: one per 4 cores, "
        "rounded up).",
    )

    @model_validator(mode="before")
    @classmethod
    def _slots_share_the_cores(cls, data: Any) -> Any:
        # Before CodeConfig's own reading of 0 (every core), which knows no workers.
        if not isinstance(data, dict):
            return data
        try:
            slots = int(data.get("slots") or 0)
            workers = int(data.get("workers") or default_workers())
        except (TypeError, ValueError):
            return data  # not numbers: the fields' own validation names them
        if slots == 0 and workers >= 1:
            return {**data, "slots": cores_per_worker(workers)}
        return data

    def config(self) -> CodeConfig:
        """The verifiers' configuration: the ``CodeConfig`` fields of these settings."""
        return CodeConfig.model_validate(self.model_dump(include=set(CodeConfig.model_fields)))


class CodeSettings(CoreSettings):
    """The code service's settings."""

    code: CodeServiceConfig = Field(default_factory=CodeServiceConfig)
