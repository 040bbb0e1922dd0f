"""The services Tribunal ships, by name, loaded lazily (the math service never imports the
judge's dependencies)."""

from __future__ import annotations

import importlib
import importlib.util
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imports FastAPI: a client reading PORTS needs none of it
    from tribunal.core.service import ServiceSpec

SERVICES: dict[str, str] = {
    "math": "tribunal.math.api",
    "code": "tribunal.code.api",
    "judge": "tribunal.judge.api",
    "citation": "tribunal.citation.api",
    "gateway": "tribunal.gateway.api",
}
"""Service name -> module defining ``SERVICE: ServiceSpec``."""

PORTS: dict[str, int] = {
    "gateway": 8100,
    "math": 8101,
    "code": 8102,
    "judge": 8103,
    "citation": 8104,
}
"""Service name -> default port (its ``ServiceSpec.port``), here so that a client such as
``tribunal score`` finds a service without importing it (a service module imports FastAPI
and its verifier: a second or more)."""


def load_service(name: str) -> ServiceSpec:
    """Return the ``ServiceSpec`` of service ``name``.

    Raises:
        KeyError: No service has that name (the message lists the names).
    """
    if name not in SERVICES:
        raise KeyError(_unknown(name))
    spec: ServiceSpec = importlib.import_module(SERVICES[name]).SERVICE
    return spec


def local_url(name: str, port: int | None = None) -> str:
    """Return ``http://127.0.0.1:<port>`` of service ``name``; without ``port``, its default
    port: where ``make up`` serves it.

    Raises:
        KeyError: No service has that name (the message lists the names).
    """
    if name not in PORTS:
        raise KeyError(_unknown(name))
    return f"http://127.0.0.1:{PORTS[name] if port is None else port}"


def port_variable(name: str) -> str:
    """The variable that moves service ``name``'s port: ``TRIBUNAL_<NAME>_PORT``."""
    return f"TRIBUNAL_{name.upper()}_PORT"


def env_port(name: str) -> int | None:
    """The port ``TRIBUNAL_<NAME>_PORT`` gives service ``name`` in this environment (the
    port ``tribunal api`` and ``tribunal up`` serve it on), or None when it is unset.

    Read from the environment alone, without the service's settings class (which would
    import its configuration), by whatever calls a service on this host: ``tribunal score``,
    the gateway's default verifier URLs.

    Raises:
        ValueError: The variable is set to something that is not a port (the message names
            it).
    """
    variable = port_variable(name)
    value = os.environ.get(variable, "").strip()
    if not value:
        return None
    if not value.isdigit() or not 0 < int(value) < 65536:
        raise ValueError(f"{variable}={value!r} is not a port")
    return int(value)


def _unknown(name: str) -> str:
    return f"unknown service {name!r}; choose one of {', '.join(SERVICES)}"


def available_services() -> list[str]:
    """Names of the services whose module is present in this installation."""
    return [name for name, module in SERVICES.items() if _installed(module)]


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # the parent package itself is absent
        return False
