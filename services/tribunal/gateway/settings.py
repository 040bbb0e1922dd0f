"""``GatewaySettings``: the core's ``TRIBUNAL_*`` plus ``TRIBUNAL_GATEWAY_<FIELD>``."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from tribunal.core.settings import CoreSettings
from tribunal.gateway.specs import SHIPPED_DIR, LoadedSpec, load_specs
from tribunal.wire.ports import env_port, local_url


def _follow(verifier: str) -> str:
    """The URL of ``verifier``'s service on this host, on the port its own setting
    (``TRIBUNAL_<NAME>_PORT``) gives it: a gateway started beside the services, as by
    ``tribunal up``, never calls a default port that a setting moved.

    Raises:
        ValueError: That setting is not a port.
    """
    return local_url(verifier, env_port(verifier))


class GatewayConfig(BaseModel):
    """``TRIBUNAL_GATEWAY_<FIELD>``: where the verifiers are, which specs, how to call them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    port: int | None = Field(default=None, description="Port of the gateway API (default 8100).")
    math_url: str = Field(
        default_factory=lambda: _follow("math"),
        description="Base URL of the math service (default: http://127.0.0.1 on "
        "TRIBUNAL_MATH_PORT when set, else 8101).",
    )
    code_url: str = Field(
        default_factory=lambda: _follow("code"),
        description="Base URL of the code service (default: http://127.0.0.1 on "
        "TRIBUNAL_CODE_PORT when set, else 8102).",
    )
    judge_url: str = Field(
        default_factory=lambda: _follow("judge"),
        description="Base URL of the judge service (default: http://127.0.0.1 on "
        "TRIBUNAL_JUDGE_PORT when set, else 8103).",
    )
    citation_url: str = Field(
        default_factory=lambda: _follow("citation"),
        description="Base URL of the citation service (default: http://127.0.0.1 on "
        "TRIBUNAL_CITATION_PORT when set, else 8104).",
    )
    specs_dir: str | None = Field(
        default=None,
        description="A directory of more reward specs (*.yaml) beside the shipped ones.",
    )
    timeout_s: float = Field(
        default=600.0, gt=0, description="How long one request to a verifier may take."
    )
    retries: int = Field(
        default=2,
        ge=0,
        description="Retries of a verifier request that failed for a retryable reason "
        "(429, 503, no answer); then its items get the error.",
    )
    shed_wait_s: float = Field(
        default=600.0,
        ge=0,
        description="How long the gateway's worker keeps a job's batch waiting for a verifier "
        "that sheds load (429) before its items get queue_full; the synchronous routes answer "
        "429 with Retry-After instead of waiting.",
    )
    max_inflight_items: int = Field(
        # Above OpenRLHF's default rollout (1,024 one-sample requests at once), whose client
        # gives a sample up after 5 tries 1 s apart: shedding it costs rewards.
        default=2048,
        ge=1,
        description="Items the synchronous routes (POST /v1/score, /get_reward, /slime) of one "
        "gateway API process score at once; a request beyond answers 429 with Retry-After, so "
        "that waiting requests cannot pile up in the process (a batch is always taken when "
        "nothing else is in flight). Jobs (POST /v1/jobs) are not counted.",
    )
    openrlhf_spec: str = Field(
        default="rloo_math",
        description="Reward spec of POST /get_reward (OpenRLHF); /get_reward/<spec> picks one.",
    )

    openrlhf_end_tokens: list[str] = Field(
        default_factory=list,
        description="End-of-sequence or padding tokens of the policy's chat template beyond "
        "the common ones, taken off the end of each OpenRLHF response (a JSON list).",
    )

    def config(self) -> GatewayConfig:
        """The gateway's configuration: these settings themselves (every service group
        answers ``config()``; the gateway has no separate verifier configuration)."""
        return self

    def verifier_urls(self) -> dict[str, str]:
        """Verifier name -> base URL."""
        return {
            "math": self.math_url,
            "code": self.code_url,
            "judge": self.judge_url,
            "citation": self.citation_url,
        }

    def load_specs(self) -> dict[str, LoadedSpec]:
        """The shipped specs plus those of ``specs_dir``.

        Raises:
            SpecError: A spec is malformed or defined twice.
        """
        return load_specs([SHIPPED_DIR] + ([Path(self.specs_dir)] if self.specs_dir else []))


class GatewaySettings(CoreSettings):
    """The gateway's settings.

    Its worker waits on the network, not on a CPU: it claims larger batches and holds more
    items at once than a verifier's worker (``worker_batch_size`` and ``worker_concurrency``
    default higher here; ``TRIBUNAL_WORKER_BATCH_SIZE`` / ``_CONCURRENCY`` override them).
    """

    gateway: GatewayConfig = Field(default_factory=GatewayConfig)
    worker_batch_size: int = Field(default=512, ge=1, description="Items a worker pulls per read.")
    worker_concurrency: int = Field(
        default=16,
        ge=1,
        description="Batches' worth of items one gateway worker holds at once.",
    )
