"""The reward gateway: one URL for a trainer, reward specs, and the ecosystem's protocols.

Library surface: reward specs (:func:`load_spec_text`, :func:`load_specs`,
:func:`shipped_specs`), the safe formula language (:func:`parse_formula`), the scoring rule
of a spec (:func:`combine`) and the verifier behind ``POST /v1/score``
(:class:`GatewayVerifier`). The HTTP service is ``tribunal.gateway.api``.
"""

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
from tribunal.gateway.verifier import GatewayItem, GatewayVerifier, VerifierClient

__all__ = [
    "ComponentResult",
    "Formula",
    "FormulaError",
    "GatewayItem",
    "GatewayVerifier",
    "LoadedSpec",
    "RewardSpec",
    "SpecError",
    "VerifierClient",
    "combine",
    "load_spec_text",
    "load_specs",
    "parse_formula",
    "shipped_specs",
]
