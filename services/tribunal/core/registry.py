"""The services a ``tribunal`` command can serve, found by their entry points (group
``tribunal.verifiers``), loaded lazily: the math service never imports the judge's
dependencies, and core names none of them.

A distribution adds a verifier by declaring, in its own ``pyproject.toml``::

    [project.entry-points."tribunal.verifiers"]
    lean = "lean_verifier.api:SERVICE"

where ``SERVICE`` is a :class:`~tribunal.core.service.ServiceSpec` and the same module defines
``create_app()`` (what ``tribunal api NAME --processes N`` hands uvicorn). Tribunal's own five
services are registered the same way, in its ``pyproject.toml``.
"""

from __future__ import annotations

import importlib.util
from importlib import metadata
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imports FastAPI: a client reading the ports needs none of it
    from tribunal.core.service import ServiceSpec

GROUP = "tribunal.verifiers"
"""The entry-point group every service is registered in."""


def _registered() -> dict[str, metadata.EntryPoint]:
    # The first distribution on sys.path that registers a name keeps it, as an import would.
    found: dict[str, metadata.EntryPoint] = {}
    for entry in metadata.entry_points(group=GROUP):
        found.setdefault(entry.name, entry)
    return found


def _entry(name: str) -> metadata.EntryPoint:
    registered = _registered()
    if name not in registered:
        raise KeyError(f"unknown service {name!r}; choose one of {', '.join(sorted(registered))}")
    return registered[name]


def service_module(name: str) -> str:
    """Return the module that defines service ``name``'s ``SERVICE`` and ``create_app``.

    Raises:
        KeyError: No installed distribution registers that name (the message lists the names).
    """
    return _entry(name).module


def load_service(name: str) -> ServiceSpec:
    """Return the ``ServiceSpec`` of service ``name``.

    Raises:
        KeyError: No installed distribution registers that name (the message lists the names).
        TypeError: The entry point names something other than a ``ServiceSpec``.
    """
    from tribunal.core.service import ServiceSpec

    spec = _entry(name).load()
    if not isinstance(spec, ServiceSpec):
        raise TypeError(
            f"entry point {name!r} of group {GROUP!r} names a {type(spec).__name__}, "
            "not a ServiceSpec"
        )
    return spec


def available_services() -> list[str]:
    """Names of the registered services whose module is present, sorted."""
    return sorted(name for name, entry in _registered().items() if _installed(entry.module))


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # the parent package itself is absent
        return False
