"""The gateway service: ``POST /v1/score`` on port 8100 (``tribunal api gateway``).

Scoring runs in the gateway's queue worker like any verifier's (embedded in the API process
on the embedded queue, ``tribunal worker gateway`` processes with Redis), so mixed batches
get the same jobs, long-poll, idempotency keys and at-least-once delivery as the verifiers.
"""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import APIRouter, FastAPI

from tribunal.core.app import create_app as create_core_app
from tribunal.core.service import ServiceSpec
from tribunal.core.verifier import Verifier
from tribunal.gateway.remote import ClientVerifiers, verifiers_unready
from tribunal.gateway.settings import GatewaySettings
from tribunal.gateway.verifier import GatewayVerifier
from tribunal.wire.ports import PORTS


def create_verifiers(settings: GatewaySettings) -> list[Verifier]:
    """The gateway serves one verifier, ``gateway``, over the shipped and configured specs.

    Raises:
        SpecError: A spec file is malformed (the service refuses to start).
    """

    def client() -> ClientVerifiers:
        return ClientVerifiers(
            settings.gateway.verifier_urls(),
            settings.gateway.timeout_s,
            settings.api_key_value,
            max_retries=settings.gateway.retries,
            shed_wait_s=settings.gateway.shed_wait_s,
        )

    return [
        GatewayVerifier(
            settings.gateway.load_specs(),
            client,
            max_inflight_items=settings.gateway.max_inflight_items,
            probe=lambda: verifiers_unready(
                settings.gateway.verifier_urls(), settings.api_key_value
            ),
        )
    ]


def routers() -> Sequence[APIRouter]:
    """``/v1/score``, ``/v1/specs``, the trainer routes (OpenRLHF's ``/get_reward``, slime's
    ``/slime``) and those again under ``/k/<key>/``."""
    from tribunal.gateway.routes import keyed, router

    return [router, keyed]


def startup_hint(settings: GatewaySettings) -> str | None:
    """Where the gateway sends each verifier's items."""
    urls = ", ".join(f"{name} {url}" for name, url in settings.gateway.verifier_urls().items())
    return f"verifiers at {urls} (TRIBUNAL_GATEWAY_<VERIFIER>_URL)"


SERVICE = ServiceSpec(
    name="gateway",
    port=PORTS["gateway"],
    settings_cls=GatewaySettings,
    create_verifiers=create_verifiers,
    routers=routers,
    startup_hint=startup_hint,
    score_routes=(),
)


def create_app(settings: GatewaySettings | None = None) -> FastAPI:
    """Build the gateway's app (settings from the environment when omitted)."""
    return create_core_app(SERVICE, settings)
