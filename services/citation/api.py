"""The citation service: ``POST /v1/citation/score`` on port 8104 (``tribunal api citation``)."""

from __future__ import annotations

from fastapi import FastAPI

from tribunal.citation.settings import CitationSettings
from tribunal.citation.verifier import CitationVerifier
from tribunal.core.app import create_app as create_core_app
from tribunal.core.service import ServiceSpec
from tribunal.core.verifier import Verifier


def create_verifiers(settings: CitationSettings) -> list[Verifier]:
    """The citation service serves one verifier."""
    return [CitationVerifier(settings.to_config())]


SERVICE = ServiceSpec(
    name="citation",
    port=8104,
    settings_cls=CitationSettings,
    create_verifiers=create_verifiers,
)


def create_app(settings: CitationSettings | None = None) -> FastAPI:
    """Build the citation service's app (settings from the environment when omitted)."""
    return create_core_app(SERVICE, settings)
