"""Where each shipped service listens by default, so that a client (``tribunal score``, the
trainers' integrations) finds one without importing it: a service module imports FastAPI and
its verifier, a second or more."""

from __future__ import annotations

import os

PORTS: dict[str, int] = {
    "gateway": 8100,
    "math": 8101,
    "code": 8102,
    "judge": 8103,
    "citation": 8104,
}
"""Service name -> default port (its ``ServiceSpec.port``)."""


def local_url(name: str, port: int | None = None) -> str:
    """Return ``http://127.0.0.1:<port>`` of service ``name``; without ``port``, its default
    port: where ``make up`` serves it.

    Raises:
        KeyError: No shipped service has that name (the message lists the names).
    """
    if name not in PORTS:
        raise KeyError(f"unknown service {name!r}; choose one of {', '.join(PORTS)}")
    return f"http://127.0.0.1:{PORTS[name] if port is None else port}"


def port_variable(name: str) -> str:
    """The variable that moves service ``name``'s port: ``TRIBUNAL_<NAME>_PORT``."""
    return f"TRIBUNAL_{name.upper()}_PORT"


def env_port(name: str) -> int | None:
    """The port ``TRIBUNAL_<NAME>_PORT`` gives service ``name`` in this environment (the
    port ``tribunal api`` and ``tribunal up`` serve it on), or None when it is unset.

    Read from the environment alone, without the service's settings class (which would
    import its configuration), by whatever calls a service on this host: ``tribunal score``,
    the gateway's default verifier URLs, the trainers' integrations.

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
