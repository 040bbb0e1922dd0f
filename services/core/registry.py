"""The services Tribunal ships, by name, loaded lazily (the math service never imports the
judge's dependencies)."""

from __future__ import annotations

import importlib
import importlib.util

from tribunal.core.service import ServiceSpec

SERVICES: dict[str, str] = {
    "math": "tribunal.math.api",
    "code": "tribunal.code.api",
    "judge": "tribunal.judge.api",
    "citation": "tribunal.citation.api",
    "gateway": "tribunal.gateway.api",
}
"""Service name -> module defining ``SERVICE: ServiceSpec``."""


def load_service(name: str) -> ServiceSpec:
    """Return the ``ServiceSpec`` of service ``name``.

    Raises:
        KeyError: No service has that name (the message lists the names).
    """
    if name not in SERVICES:
        raise KeyError(f"unknown service {name!r}; choose one of {', '.join(SERVICES)}")
    spec: ServiceSpec = importlib.import_module(SERVICES[name]).SERVICE
    return spec


def available_services() -> list[str]:
    """Names of the services whose module is present in this installation."""
    return [name for name, module in SERVICES.items() if _installed(module)]


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # the parent package itself is absent
        return False
