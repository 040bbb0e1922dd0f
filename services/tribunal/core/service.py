"""What a service is: a name, a port, its settings and the verifiers it serves.

Each verifier package declares one ``ServiceSpec`` in its ``api.py``; the CLI and the app
factory take it from there (see ``tribunal.core.registry``).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, FastAPI

from tribunal.core.settings import CoreSettings
from tribunal.core.verifier import Verifier


def settle_heap() -> None:
    """Take what a server process built at start-up (modules, its app, its verifiers'
    libraries) out of the cyclic garbage collector's generations: it lives as long as the
    process, and each full collection walked all of it again (a sixth of the gateway's CPU
    per item). Called by ``tribunal api`` and ``tribunal worker`` once started."""
    gc.collect()
    gc.freeze()


def _no_routers() -> Sequence[APIRouter]:
    return ()


def _no_hint(settings: Any) -> str | None:
    return None


def _no_mount(app: FastAPI) -> AbstractAsyncContextManager[None]:
    return contextlib.nullcontext()


@dataclass(frozen=True)
class ServiceSpec:
    """A deployable service.

    Attributes:
        name: Service name (``math``, ``code``, ``judge``), used by the CLI and for
            ``openapi/<name>.json``.
        port: Default port (``TRIBUNAL_<NAME>_PORT`` overrides it, see ``port_of``).
        settings_cls: The service's settings class (a ``CoreSettings`` subclass).
        create_verifiers: Build the service's verifiers from its settings (cheap: no process
            or connection is made before ``Verifier.start``).
        routers: Extra routes beyond ``/v1/<verifier>/score`` (e.g. ``/v1/code/run``).
        startup_hint: A line to print at start-up about the configuration, or None.
        score_routes: Verifiers that get ``POST /v1/<name>/score`` (None: all). The others
            are reached through ``routers`` and ``/v1/jobs`` only.
        mount: Add routes that are no ``APIRouter`` (an ASGI app of another protocol, such
            as the code service's MCP server) to a new app, and return what runs beside the
            app's lifespan (entered once the runtime is up, left before it goes).
    """

    name: str
    port: int
    settings_cls: type[CoreSettings]
    create_verifiers: Callable[[Any], list[Verifier]]
    routers: Callable[[], Sequence[APIRouter]] = _no_routers
    startup_hint: Callable[[Any], str | None] = _no_hint
    score_routes: tuple[str, ...] | None = None
    mount: Callable[[FastAPI], AbstractAsyncContextManager[None]] = _no_mount

    def settings(self, workers: int | None = None) -> CoreSettings:
        """Read this service's settings from the environment; ``workers``, when given, in
        place of ``TRIBUNAL_<NAME>_WORKERS`` (pool sizes left at 0 follow it).

        Raises:
            ValueError: ``workers`` > 1 for a service that runs one worker process.
        """
        if workers is None:
            return self.settings_cls()
        group = self.settings_cls.model_fields.get(self.name)
        annotation = None if group is None else group.annotation
        if isinstance(annotation, type) and "workers" in getattr(annotation, "model_fields", {}):
            override: dict[str, Any] = {self.name: {"workers": workers}}
            return self.settings_cls(**override)
        if workers != 1:
            raise ValueError(f"{self.name} runs one worker process (it waits on I/O, not on cores)")
        return self.settings_cls()

    def workers_of(self, settings: CoreSettings) -> int:
        """Worker processes ``tribunal worker <name>`` runs: ``TRIBUNAL_<NAME>_WORKERS`` (the
        ``workers`` of the service's settings group) for the CPU-bound services, else 1 (a
        service that waits on I/O scales within one process)."""
        group = getattr(settings, self.name, None)
        workers: int | None = getattr(group, "workers", None)
        return 1 if workers is None else workers

    def port_of(self, settings: CoreSettings) -> int:
        """The port to serve on: ``TRIBUNAL_<NAME>_PORT`` (the ``port`` of the service's
        settings group) when set, else ``port``."""
        group = getattr(settings, self.name, None)
        port: int | None = getattr(group, "port", None)
        return self.port if port is None else port
