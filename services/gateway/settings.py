"""``GatewaySettings``: the gateway's ``TRIBUNAL_GATEWAY_*`` environment."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from tribunal.core.settings import CoreSettings
from tribunal.gateway.specs import SHIPPED_DIR, LoadedSpec, load_specs


class GatewaySettings(CoreSettings):
    """Core settings plus the gateway's own (env ``TRIBUNAL_GATEWAY_<FIELD>``).

    The gateway's worker waits on the network, not on a CPU: it claims larger batches and
    more of them at once than a verifier's worker (``worker_batch_size`` and
    ``worker_concurrency`` default higher here; the same variables override them).
    """

    gateway_port: int = Field(default=8100, description="Port of the gateway API.")
    gateway_math_url: str = Field(
        default="http://127.0.0.1:8101", description="Base URL of the math service."
    )
    gateway_code_url: str = Field(
        default="http://127.0.0.1:8102", description="Base URL of the code service."
    )
    gateway_judge_url: str = Field(
        default="http://127.0.0.1:8103", description="Base URL of the judge service."
    )
    gateway_citation_url: str = Field(
        default="http://127.0.0.1:8104", description="Base URL of the citation service."
    )
    gateway_specs_dir: Path | None = Field(
        default=None,
        description="A directory of more reward specs (*.yaml) beside the shipped ones.",
    )
    gateway_timeout_s: float = Field(
        default=600.0, gt=0, description="How long one request to a verifier may take."
    )
    gateway_retries: int = Field(
        default=2,
        ge=0,
        description="Retries of a verifier request that failed for a retryable reason "
        "(429, 503, no answer); then its items get the error.",
    )
    gateway_openrlhf_spec: str = Field(
        default="rloo_math",
        description="Reward spec of POST /get_reward (OpenRLHF); /get_reward/<spec> picks one.",
    )
    worker_batch_size: int = Field(default=512, ge=1, description="Items a worker pulls per read.")
    worker_concurrency: int = Field(
        default=16, ge=1, description="Batches one gateway worker scores at once."
    )

    def verifier_urls(self) -> dict[str, str]:
        """Verifier name -> base URL."""
        return {
            "math": self.gateway_math_url,
            "code": self.gateway_code_url,
            "judge": self.gateway_judge_url,
            "citation": self.gateway_citation_url,
        }

    def load_specs(self) -> dict[str, LoadedSpec]:
        """The shipped specs plus those of ``gateway_specs_dir``.

        Raises:
            SpecError: A spec is malformed or defined twice.
        """
        dirs = [SHIPPED_DIR] + ([self.gateway_specs_dir] if self.gateway_specs_dir else [])
        return load_specs(dirs)
