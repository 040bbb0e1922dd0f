"""The judge service: ``POST /v1/judge/score`` on port 8103 (``tribunal api judge``)."""

from __future__ import annotations

from fastapi import FastAPI

from tribunal.core.app import create_app as create_core_app
from tribunal.core.mcp import verifier_mount
from tribunal.core.service import ServiceSpec
from tribunal.core.verifier import Verifier
from tribunal.judge.settings import JudgeSettings
from tribunal.judge.verifier import JudgeVerifier
from tribunal.wire.ports import PORTS


def create_verifiers(settings: JudgeSettings) -> list[Verifier]:
    """The judge service serves one verifier."""
    return [JudgeVerifier(settings.judge.config())]


def startup_hint(settings: JudgeSettings) -> str | None:
    """One line on how to configure a backend when none is."""
    if settings.judge.backend.kind != "none":
        return None
    return (
        "no judge backend configured: its items get backend_unavailable errors. Set "
        "TRIBUNAL_JUDGE_BASE_URL=http://host:8000/v1 (any OpenAI-compatible server, e.g. vLLM) "
        "and TRIBUNAL_JUDGE_MODEL, or TRIBUNAL_JUDGE_BACKEND=transformers with "
        "TRIBUNAL_JUDGE_MODEL=<local model path>"
    )


SERVICE = ServiceSpec(
    name="judge",
    port=PORTS["judge"],
    settings_cls=JudgeSettings,
    create_verifiers=create_verifiers,
    startup_hint=startup_hint,
    mount=verifier_mount(
        "judge",
        "Grade one response against rubrics with the judge model: item {question, response, "
        "rubrics? (or positive_rubrics / negative_rubrics), rubric_sets?}. Its reward in "
        "[0, 1] and each rubric's verdict, as `POST /v1/judge/score` answers it.",
    ),
)


def create_app(settings: JudgeSettings | None = None) -> FastAPI:
    """Build the judge service's app (settings from the environment when omitted)."""
    return create_core_app(SERVICE, settings)
