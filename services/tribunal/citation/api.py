"""The citation service: ``POST /v1/citation/score`` on port 8104 (``tribunal api citation``)."""

from __future__ import annotations

from fastapi import FastAPI

from tribunal.citation.judge import LLMSupport
from tribunal.citation.nli import NLISupport
from tribunal.citation.settings import CitationSettings
from tribunal.citation.verifier import CitationVerifier
from tribunal.core.app import create_app as create_core_app
from tribunal.core.mcp import verifier_mount
from tribunal.core.service import ServiceSpec
from tribunal.core.verifier import Verifier
from tribunal.llm import create_backend
from tribunal.wire.ports import PORTS


def create_verifiers(settings: CitationSettings) -> list[Verifier]:
    """The citation service serves one verifier (its judge mode on the configured backend)."""
    group = settings.citation
    judge = None
    if group.backend.kind != "none":
        judge = LLMSupport(create_backend(group.backend, "TRIBUNAL_CITATION_"), group.judge)
    nli = NLISupport(group.nli_model) if group.nli_model else None
    verifier = CitationVerifier(
        group.config(),
        judge,
        nli=nli,
        judge_hash=group.judge_hash(),
        processes=group.processes,
        timeout_s=group.check_timeout_s,
    )
    return [verifier]


def startup_hint(settings: CitationSettings) -> str | None:
    """One line on the default support mode when no LLM backend is configured."""
    if settings.citation.backend.kind != "none":
        return None
    return (
        "no citation LLM backend configured: the default support mode is lexical (token "
        "overlap) and options.support='judge' items get backend_unavailable errors. Set "
        "TRIBUNAL_CITATION_BASE_URL=http://host:8000/v1 (any OpenAI-compatible server)"
    )


SERVICE = ServiceSpec(
    name="citation",
    port=PORTS["citation"],
    settings_cls=CitationSettings,
    create_verifiers=create_verifiers,
    startup_hint=startup_hint,
    mount=verifier_mount(
        "citation",
        "Check one answer's citations against the evidence it could cite: item {response "
        "(claims in its <answer> block, cited as <cite id=...>), evidence {id: text} or "
        "tool_output, question?, options?}. Its reward in [0, 1] and each claim's support, as "
        "`POST /v1/citation/score` answers it.",
    ),
)


def create_app(settings: CitationSettings | None = None) -> FastAPI:
    """Build the citation service's app (settings from the environment when omitted)."""
    return create_core_app(SERVICE, settings)
