"""Settings of the code service: the core's ``TRIBUNAL_*`` plus ``TRIBUNAL_CODE_<FIELD>``."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from tribunal.code.config import CodeConfig
from tribunal.code.sessions import SessionLimits
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

    max_sessions: int = Field(
        default=8,
        ge=0,
        description="Code-interpreter sessions one worker holds at once (each a sandbox); the "
        "next start is refused with `sessions_full` (retryable). 0: no sessions.",
    )
    session_idle_ttl_s: float = Field(
        default=300.0, gt=0, description="A session idle this long is closed (s)."
    )
    session_budget_s: float = Field(
        default=600.0, gt=0, description="Wall-clock time all calls of a session may take (s)."
    )
    session_call_timeout_s: float = Field(
        default=10.0, gt=0, description="Wall-clock limit of a session call that sets none (s)."
    )
    session_max_call_timeout_s: float = Field(
        default=60.0, gt=0, description="Largest wall-clock limit a session call may ask (s)."
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

    def session_limits(self) -> SessionLimits:
        """The code-interpreter sessions' limits."""
        return SessionLimits(
            max_sessions=self.max_sessions,
            idle_ttl_s=self.session_idle_ttl_s,
            budget_s=self.session_budget_s,
            call_timeout_s=self.session_call_timeout_s,
            max_call_timeout_s=self.session_max_call_timeout_s,
            memory_mb=self.max_memory_mb,
            max_output_bytes=self.max_output_bytes,
        )

    def config(self) -> CodeConfig:
        """The verifiers' configuration: the ``CodeConfig`` fields of these settings."""
        return CodeConfig.model_validate(self.model_dump(include=set(CodeConfig.model_fields)))


class CodeSettings(CoreSettings):
    """The code service's settings."""

    code: CodeServiceConfig = Field(default_factory=CodeServiceConfig)
