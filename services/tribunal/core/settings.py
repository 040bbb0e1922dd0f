"""Settings shared by every service, read from ``TRIBUNAL_*`` environment variables.

Each service subclasses :class:`CoreSettings` and adds one field named after itself whose
model groups its settings (``math: MathServiceConfig``): ``TRIBUNAL_<SERVICE>_<FIELD>``
sets a field of that group (``TRIBUNAL_MATH_TIMEOUT_S`` is ``settings.math.timeout_s``; the
name is split at its first ``_`` after the prefix). The group extends the verifier's own
frozen configuration, so that each field and its default are written once. Nothing here is
built at import time: the CLI and the app factory create a settings object and pass it down.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from tribunal.core.layout import default_api_processes

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class CoreSettings(BaseSettings):
    """Queue, limits and HTTP settings common to every service."""

    model_config = SettingsConfigDict(
        env_prefix="TRIBUNAL_",
        env_nested_delimiter="_",
        env_nested_max_split=1,
        extra="ignore",
    )

    redis_url: str = Field(
        default="redis://127.0.0.1:6379/0", description="Redis holding the queue and cache."
    )
    queue: Literal["auto", "redis", "memory"] = Field(
        default="auto",
        description=(
            "Queue backend: redis, memory (embedded, single host, nothing survives a restart), "
            "or auto: Redis when TRIBUNAL_REDIS_URL is set (waiting for it when it is down: "
            "/readyz answers 503 meanwhile), else Redis at the default URL when it answers, "
            "else the embedded queue."
        ),
    )
    key_prefix: str = Field(default="tribunal", description="Prefix of every Redis key.")
    host: str = Field(default="127.0.0.1", description="Address the HTTP API binds to.")
    api_processes: int = Field(
        default_factory=default_api_processes,
        ge=1,
        description="HTTP API processes `tribunal api` runs on its one port (default: one per "
        "8 cores); with Redis only (the embedded queue lives in one process).",
    )
    keep_alive_s: int = Field(
        default=75,
        ge=1,
        description="How long the HTTP API keeps an idle client connection open (uvicorn's "
        "keep-alive timeout, 5 s by default). Longer than the clients' own idle expiry (httpx "
        "5 s, aiohttp 15 s), so that a client closes an idle connection first instead of "
        "sending a request on one the server is closing (a connection error, not a 429).",
    )
    api_key: SecretStr | None = Field(
        default=None,
        description="When set, every /v1 and /inspect request needs the key: `Authorization: "
        "Bearer <key>`, or Basic credentials with the key as password; the trainer routes "
        "also take it in the path, /k/<key>/ (docs/integrations.md).",
    )
    max_batch_items: int = Field(default=4096, ge=1, description="Items per request (413 above).")
    max_request_bytes: int = Field(
        default=64 * 1024 * 1024, ge=1024, description="Bytes per request body (413 above)."
    )
    max_queue_items: int = Field(
        default=100_000, ge=1, description="Items waiting per verifier; 429 + Retry-After above."
    )
    sync_timeout_s: float = Field(
        default=300.0, gt=0, description="How long POST /v1/<verifier>/score waits for results."
    )
    max_wait_s: float = Field(
        default=60.0, gt=0, description="Longest long-poll of GET /v1/jobs/{id}?wait=."
    )
    result_ttl_s: int = Field(default=3600, ge=1, description="How long job results are kept.")
    max_done_jobs: int = Field(
        default=20_000,
        ge=1,
        description="Finished jobs whose results Redis keeps (all verifiers together); the "
        "oldest beyond are deleted with their idempotency key (GET /v1/jobs/{id}: 404).",
    )
    max_dead_letters: int = Field(
        default=10_000,
        ge=1,
        description="Entries kept per verifier's dead-letter stream; the oldest beyond are "
        "dropped and counted (tribunal_dead_letters_dropped).",
    )
    cache_ttl_s: int = Field(
        default=86400, ge=0, description="Result cache lifetime; 0 disables it."
    )
    cache_max_items: int = Field(
        default=100_000,
        ge=0,
        description="Entries of the result cache per verifier (in Redis or in memory); the "
        "least recently used go first.",
    )
    worker_batch_size: int = Field(default=64, ge=1, description="Items a worker pulls per read.")
    worker_concurrency: int = Field(
        default=4,
        ge=1,
        description=(
            "Batches' worth of items one worker process holds at once (claimed, not yet "
            "scored); it claims again as room frees up."
        ),
    )
    visibility_timeout_s: float = Field(
        default=15.0,
        gt=0,
        description=(
            "An item pending this long without a worker heartbeat is claimed by another worker."
        ),
    )
    max_deliveries: int = Field(
        default=3, ge=1, description="Deliveries before an item goes to the dead-letter stream."
    )
    worker_heartbeat_s: float = Field(
        default=2.0, gt=0, description="How often a worker proves it is alive and holds its items."
    )
    worker_grace_s: float = Field(
        default=8.0,
        ge=0,
        description=(
            "On SIGTERM, how long a worker may finish its batches before it releases the rest "
            "to other workers (below Docker's 10 s stop timeout)."
        ),
    )
    inspect_sample_rate: float = Field(
        default=1.0,
        ge=0.0,
        le=1.0,
        description="Share of scored items the reward inspector (/inspect) keeps, drawn per "
        "GRPO group (a group is kept whole or not at all); 0 turns recording off.",
    )
    inspect_max_items: int = Field(
        default=5000,
        ge=1,
        description="Items the reward inspector keeps per verifier (in Redis beside the "
        "queue, or in memory with the embedded queue); the oldest go first.",
    )
    inspect_ttl_s: int = Field(
        default=86400, ge=1, description="How long the reward inspector keeps an item (s)."
    )
    log_level: str = Field(
        default="INFO",
        description="Python logging level: DEBUG, INFO, WARNING, ERROR or CRITICAL (any case).",
    )

    @field_validator("log_level")
    @classmethod
    def _known_log_level(cls, value: str) -> str:
        if value.upper() not in LOG_LEVELS:
            raise ValueError(f"unknown log level {value!r}; known: {', '.join(LOG_LEVELS)}")
        return value.upper()

    @model_validator(mode="after")
    def _heartbeat_inside_visibility(self) -> CoreSettings:
        # A worker whose heartbeat is not more frequent than the visibility timeout looks dead
        # between two beats: its items would be claimed again and scored twice.
        if self.worker_heartbeat_s >= self.visibility_timeout_s:
            raise ValueError(
                f"worker_heartbeat_s ({self.worker_heartbeat_s}) must be shorter than "
                f"visibility_timeout_s ({self.visibility_timeout_s})"
            )
        return self

    @property
    def redis_named(self) -> bool:
        """True when a Redis URL was named (``TRIBUNAL_REDIS_URL``, or ``TRIBUNAL_QUEUE=redis``):
        it is then used even while it is down, never replaced by the embedded queue."""
        return self.queue == "redis" or "redis_url" in self.model_fields_set

    @property
    def api_key_value(self) -> str | None:
        """The bearer token, or None when auth is off."""
        return self.api_key.get_secret_value() if self.api_key else None
