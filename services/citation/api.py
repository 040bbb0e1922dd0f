"""The citation service: ``POST /v1/citation/score`` on port 8104 (``tribunal api citation``)."""

from __future__ import annotations

from fastapi import FastAPI

from tribunal.citation.judge import LLMSupport
from tribunal.citation.settings import CitationSettings
from tribunal.citation.verifier import CitationVerifier
from tribunal.core.app import create_app as create_core_app
from tribunal.core.service import ServiceSpec
from tribunal.core.verifier import Verifier
from tribunal.llm import create_backend


def create_verifiers(settings: CitationSettings) -> list[Verifier]:
    """The citation service serves one verifier (its judge mode on the configured backend)."""
    backend_config = settings.backend_config()
    judge = None
    if backend_config.kind != "none":
        backend = create_backend(backend_config, "TRIBUNAL_CITATION_")
        judge = LLMSupport(backend, settings.judge_settings())
    return [
        CitationVerifier(
            settings.to_config(),
            judge,
            judge_hash={
                "backend": backend_config.hash_payload(),
                "claims_per_call": settings.citation_claims_per_call,
            },
        )
    ]


def startup_hint(settings: CitationSettings) -> str | None:
    """One line on the default support mode when no LLM backend is configured."""
    if settings.has_backend():
        return None
    return (
        "no citation LLM backend configured: the default support mode is lexical (token "
        "overlap) and options.support='judge' items get backend_unavailable errors. Set "
        "TRIBUNAL_CITATION_BASE_URL=http://host:8000/v1 (any OpenAI-compatible server)"
    )


SERVICE = ServiceSpec(
    name="citation",
    port=8104,
    settings_cls=CitationSettings,
    create_verifiers=create_verifiers,
    startup_hint=startup_hint,
)


def create_app(settings: CitationSettings | None = None) -> FastAPI:
    """Build the citation service's app (settings from the environment when omitted)."""
    return create_core_app(SERVICE, settings)
