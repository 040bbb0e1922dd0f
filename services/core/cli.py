"""The ``tribunal`` command: ``up``, ``api``, ``worker``, ``openapi``."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
from pathlib import Path
from typing import Annotated

import typer

from tribunal.core.errors import ConfigurationError
from tribunal.core.registry import available_services, load_service
from tribunal.core.service import ServiceSpec
from tribunal.core.settings import CoreSettings

app = typer.Typer(help="Tribunal: reward services for RL of language models.", no_args_is_help=True)

ServiceArg = Annotated[str, typer.Argument(help="Service name: math, code or judge.")]


def _spec(name: str) -> ServiceSpec:
    try:
        return load_service(name)
    except KeyError as exc:
        raise typer.BadParameter(str(exc.args[0])) from exc


def _port(spec: ServiceSpec, settings: CoreSettings) -> int:
    port: int = getattr(settings, f"{spec.name}_port", spec.port)
    return port


def _setup_logging(settings: CoreSettings) -> None:
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


@app.command()
def api(
    service: ServiceArg,
    port: Annotated[int | None, typer.Option(help="Port (default: the service's).")] = None,
) -> None:
    """Run one service's HTTP API (binds to TRIBUNAL_HOST, 127.0.0.1 by default)."""
    import uvicorn

    from tribunal.core.app import create_app

    spec = _spec(service)
    settings = spec.settings()
    _setup_logging(settings)
    uvicorn.run(
        create_app(spec, settings),
        host=settings.host,
        port=port or _port(spec, settings),
        log_level=settings.log_level.lower(),
        access_log=False,
    )


@app.command()
def worker(service: ServiceArg) -> None:
    """Run the queue workers of one service until SIGTERM or Ctrl-C (needs Redis)."""
    from tribunal.core.worker_main import run_workers

    spec = _spec(service)
    settings = spec.settings()
    _setup_logging(settings)
    try:
        asyncio.run(run_workers(spec, settings))
    except ConfigurationError as exc:
        typer.echo(f"tribunal worker {service}: refusing to start: {exc.message}", err=True)
        raise typer.Exit(2) from exc


@app.command()
def healthcheck(
    service: ServiceArg,
    port: Annotated[int | None, typer.Option(help="Port (default: the service's).")] = None,
) -> None:
    """Exit 0 if the service's /readyz answers 200 (for container healthchecks), else 1."""
    import httpx

    spec = _spec(service)
    settings = spec.settings()
    url = f"http://127.0.0.1:{port or _port(spec, settings)}/readyz"
    try:
        response = httpx.get(url, timeout=3.0)
    except httpx.HTTPError as exc:
        typer.echo(f"{url}: {exc}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(f"{url}: {response.status_code} {response.text}")
    raise typer.Exit(0 if response.status_code == 200 else 1)


@app.command()
def openapi(
    out_dir: Annotated[Path, typer.Option(help="Where to write <service>.json.")] = Path("openapi"),
) -> None:
    """Write the OpenAPI document of every service to OUT_DIR/<service>.json."""
    from tribunal.core.app import create_app

    out_dir.mkdir(parents=True, exist_ok=True)
    for name in available_services():
        spec = load_service(name)
        document = create_app(spec, spec.settings_cls(queue="memory")).openapi()
        path = out_dir / f"{name}.json"
        path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
        typer.echo(f"wrote {path}")


@app.command()
def up(
    services: Annotated[
        list[str] | None, typer.Argument(help="Services to run (default: all installed).")
    ] = None,
) -> None:
    """Run the whole stack in the foreground: each service's API and workers, and the queue.

    Uses the Redis at TRIBUNAL_REDIS_URL when it is set (waiting for it if it is down), or
    at the default URL when it answers; otherwise each API runs its workers in-process on the
    embedded queue. Ctrl-C stops everything.
    """
    from tribunal.core.supervisor import Supervisor

    names = services or available_services()
    specs = [_spec(name) for name in names]
    settings = CoreSettings()
    supervisor = Supervisor(specs, settings)
    signal.signal(signal.SIGTERM, lambda *_: supervisor.request_stop())
    # Started as a background job, the shell hands us SIGINT ignored: restore Ctrl-C.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    code = supervisor.run()
    raise typer.Exit(code)


if __name__ == "__main__":
    app()
