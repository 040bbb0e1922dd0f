"""The math service: ``POST /v1/math/score`` on port 8101 (``tribunal api math``)."""

from __future__ import annotations

from fastapi import FastAPI

from tribunal.core.app import create_app as create_core_app
from tribunal.core.mcp import verifier_mount
from tribunal.core.service import ServiceSpec
from tribunal.core.verifier import Verifier
from tribunal.math.settings import MathSettings
from tribunal.math.verifier import MathVerifier
from tribunal.wire.ports import PORTS


def create_verifiers(settings: MathSettings) -> list[Verifier]:
    """The math service serves one verifier."""
    group = settings.math
    return [MathVerifier(group.config(), processes=group.processes, timeout_s=group.timeout_s)]


SERVICE = ServiceSpec(
    name="math",
    port=PORTS["math"],
    settings_cls=MathSettings,
    create_verifiers=create_verifiers,
    mount=verifier_mount(
        "math",
        "Grade one completion against a reference answer: item {response, ground_truth, "
        "options?}. Its reward (1 correct, 0 not) and what was compared (details), as "
        "`POST /v1/math/score` answers it.",
    ),
)


def create_app(settings: MathSettings | None = None) -> FastAPI:
    """Build the math service's app (settings from the environment when omitted)."""
    return create_core_app(SERVICE, settings)
