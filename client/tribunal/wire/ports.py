"""Where each shipped service listens by default, so that a client (``tribunal score``, the
trainers' integrations) finds one without importing it: a service module imports FastAPI and
its verifier, a second or more."""

from __future__ import annotations

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
