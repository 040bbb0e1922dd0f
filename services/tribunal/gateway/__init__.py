"""The reward gateway: one URL for a trainer, reward specs, and the ecosystem's protocols.

Library surface: reward specs (:func:`load_spec_text`, :func:`load_specs`,
:func:`shipped_specs`), the safe formula language (:func:`parse_formula`), the scoring rule
of a spec (:func:`combine`), the verifier behind ``POST /v1/score``
(:class:`GatewayVerifier`) and the wire models (:class:`GatewayItem`,
:class:`GatewayScoreRequest`, :class:`SpecDetails`). The HTTP service is
``tribunal.gateway.api``. Names are imported on first use, so ``tribunal.wire.gateway``
(the wire models) imports with pydantic alone.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tribunal.gateway.expression import Formula, FormulaError, parse_formula
    from tribunal.gateway.scorer import ComponentResult, combine
    from tribunal.gateway.specs import (
        LoadedSpec,
        RewardSpec,
        SpecError,
        load_spec_text,
        load_specs,
        shipped_specs,
    )
    from tribunal.gateway.verifier import GatewayVerifier, VerifierClient
    from tribunal.wire.gateway import (
        GatewayItem,
        GatewayScoreRequest,
        SpecDetails,
        SpecInfo,
        SubReward,
    )

_EXPORTS = {
    "Formula": "tribunal.gateway.expression",
    "FormulaError": "tribunal.gateway.expression",
    "parse_formula": "tribunal.gateway.expression",
    "GatewayItem": "tribunal.wire.gateway",
    "GatewayScoreRequest": "tribunal.wire.gateway",
    "SpecDetails": "tribunal.wire.gateway",
    "SpecInfo": "tribunal.wire.gateway",
    "SubReward": "tribunal.wire.gateway",
    "ComponentResult": "tribunal.gateway.scorer",
    "combine": "tribunal.gateway.scorer",
    "LoadedSpec": "tribunal.gateway.specs",
    "RewardSpec": "tribunal.gateway.specs",
    "SpecError": "tribunal.gateway.specs",
    "load_spec_text": "tribunal.gateway.specs",
    "load_specs": "tribunal.gateway.specs",
    "shipped_specs": "tribunal.gateway.specs",
    "GatewayVerifier": "tribunal.gateway.verifier",
    "VerifierClient": "tribunal.gateway.verifier",
}
"""Public name -> defining module, imported on first use (PEP 562)."""

__all__ = [
    "ComponentResult",
    "Formula",
    "FormulaError",
    "GatewayItem",
    "GatewayScoreRequest",
    "GatewayVerifier",
    "LoadedSpec",
    "RewardSpec",
    "SpecDetails",
    "SpecError",
    "SpecInfo",
    "SubReward",
    "VerifierClient",
    "combine",
    "load_spec_text",
    "load_specs",
    "parse_formula",
    "shipped_specs",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
