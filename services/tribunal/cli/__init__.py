"""The ``tribunal`` command: ``up``, ``api``, ``worker``, ``openapi``, ``score``, ``calibrate``,
``train``, ``data``."""

from __future__ import annotations

import asyncio
import copy
import gc
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from tribunal.cli.calibrate import app as calibrate_app
from tribunal.wire.errors import ConfigurationError

if TYPE_CHECKING:  # both import pydantic-settings or FastAPI: `tribunal score` needs neither
    from tribunal.core.service import ServiceSpec
    from tribunal.core.settings import CoreSettings

app = typer.Typer(help="Tribunal: reward services for RL of language models.", no_args_is_help=True)
app.add_typer(calibrate_app, name="calibrate")

ServiceArg = Annotated[str, typer.Argument(help="Service name: math, code, judge or citation.")]


def _spec(name: str) -> ServiceSpec:
    from tribunal.core.registry import load_service  # imports FastAPI: not for `score`

    try:
        return load_service(name)
    except KeyError as exc:
        raise typer.BadParameter(str(exc.args[0])) from exc


def _port(spec: ServiceSpec, settings: CoreSettings) -> int:
    return spec.port_of(settings)


def _probe_port(name: str) -> int:
    """The port of service ``name`` on this host, for a probe: a shipped service's from the
    environment alone (``tribunal.wire.ports``). Loading the service would import its verifier
    (Math-Verify and sympy, FastAPI: seconds of CPU), and a container's healthcheck that takes
    longer than its timeout on a loaded host marks a healthy service down."""
    from tribunal.wire.ports import PORTS, env_port

    if name not in PORTS:
        spec = _spec(name)  # a verifier of another distribution: only its spec knows
        return _port(spec, spec.settings())
    try:
        return env_port(name) or PORTS[name]
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc


LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


PER_REQUEST_LOGGERS = ("httpx", "httpcore")
"""Libraries that log a line per HTTP request at INFO (httpx: one per request the gateway
makes to a verifier): a log that grows with traffic. They log at WARNING unless the level
is DEBUG; requests are counted in /metrics instead."""


def _quiet_level(level: str) -> str:
    """The level of the per-request loggers under the service's ``level``."""
    return level if level == "DEBUG" else "WARNING"


def _setup_logging(settings: CoreSettings) -> None:
    level = settings.log_level.upper()
    logging.basicConfig(level=level, format=LOG_FORMAT)
    for name in PER_REQUEST_LOGGERS:
        logging.getLogger(name).setLevel(_quiet_level(level))


def _processes_log_config(level: str) -> dict[str, Any]:
    """uvicorn's logging configuration plus the root logger at ``level`` in our format.

    uvicorn applies it in each API process it starts (they are spawned: ``_setup_logging``
    ran in the parent only), so that their logs read like every other process's."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["formatters"]["tribunal"] = {"format": LOG_FORMAT}
    config["handlers"]["tribunal"] = {
        "class": "logging.StreamHandler",
        "formatter": "tribunal",
        "stream": "ext://sys.stderr",
    }
    config["root"] = {"handlers": ["tribunal"], "level": level}
    for name in PER_REQUEST_LOGGERS:
        config["loggers"][name] = {"level": _quiet_level(level)}
    return config


@app.command()
def api(
    service: ServiceArg,
    port: Annotated[int | None, typer.Option(help="Port (default: the service's).")] = None,
) -> None:
    """Run one service's HTTP API (binds to TRIBUNAL_HOST, 127.0.0.1 by default).

    With Redis, TRIBUNAL_API_PROCESSES processes share the port (default: one per 8 cores)."""
    import uvicorn

    spec = _spec(service)
    settings = spec.settings()
    _setup_logging(settings)
    options: dict[str, Any] = {
        "host": settings.host,
        "port": port or _port(spec, settings),
        "log_level": settings.log_level.lower(),
        "access_log": False,
        "timeout_keep_alive": settings.keep_alive_s,
    }
    if settings.api_processes > 1:
        from tribunal.core.supervisor import uses_redis

        if uses_redis(settings):
            options["log_config"] = _processes_log_config(settings.log_level.upper())
            _serve_processes(service, settings.api_processes, options)
            return
        logging.getLogger(__name__).warning(
            "TRIBUNAL_API_PROCESSES=%d: one process only, the embedded queue lives in it",
            settings.api_processes,
        )
    from tribunal.core.app import create_app
    from tribunal.core.service import settle_heap

    app_ = create_app(spec, settings)
    settle_heap()
    uvicorn.run(app_, **options)


def _serve_processes(service: str, processes: int, options: dict[str, Any]) -> None:
    """Serve ``processes`` uvicorn workers of the service's app factory on one port."""
    import shutil
    import tempfile

    import uvicorn

    from tribunal.core.metrics import SHARED_DIR
    from tribunal.core.registry import service_module

    # The processes inherit this: each builds its app from the environment, on Redis (not
    # a fallback of its own), and writes its metrics where any of them reads them back.
    os.environ["TRIBUNAL_QUEUE"] = "redis"
    made = SHARED_DIR not in os.environ
    if made:
        os.environ[SHARED_DIR] = tempfile.mkdtemp(prefix="tribunal-metrics-")
    try:
        uvicorn.run(
            f"{service_module(service)}:create_app",
            factory=True,
            workers=processes,
            **options,
        )
    finally:
        if made:
            shutil.rmtree(os.environ[SHARED_DIR], ignore_errors=True)


@app.command()
def worker(
    service: ServiceArg,
    workers: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Worker processes (default: TRIBUNAL_<NAME>_WORKERS; 1 runs one, in this "
            "process).",
        ),
    ] = None,
    member: Annotated[
        int | None, typer.Option(hidden=True, help="Run as member K of a worker group.")
    ] = None,
) -> None:
    """Run the queue workers of one service until SIGTERM or Ctrl-C (needs Redis).

    A CPU-bound service (math, code) runs TRIBUNAL_<NAME>_WORKERS worker processes, by default
    one per 4 cores, each with its share of the cores as its pool."""
    from tribunal.core.worker_group import EXIT_REFUSED, run_worker_group
    from tribunal.core.worker_main import run_workers

    spec = _spec(service)
    try:
        settings = spec.settings(workers)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--workers") from exc
    _setup_logging(settings)
    count = spec.workers_of(settings)
    if member is None and count > 1:
        raise typer.Exit(run_worker_group(service, count))
    try:
        asyncio.run(run_workers(spec, settings))
    except ConfigurationError as exc:
        if not member:  # a group's members share one configuration: member 0 says why
            typer.echo(f"tribunal worker {service}: refusing to start: {exc.message}", err=True)
        raise typer.Exit(EXIT_REFUSED) from exc


@app.command()
def healthcheck(
    service: ServiceArg,
    port: Annotated[int | None, typer.Option(help="Port (default: the service's).")] = None,
    strict: Annotated[
        bool, typer.Option(help="Exit 1 unless the status is ready (degraded counts as down).")
    ] = False,
) -> None:
    """Exit 0 if the service's /readyz answers 200 (ready or degraded: for container
    healthchecks), else 1; with --strict, only if it is ready."""
    import httpx

    url = f"http://127.0.0.1:{port or _probe_port(service)}/readyz"
    try:
        response = httpx.get(url, timeout=3.0)
    except httpx.HTTPError as exc:
        typer.echo(f"{url}: {exc}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(f"{url}: {response.status_code} {response.text}")
    ready = response.status_code == 200
    if strict:
        try:
            ready = ready and response.json().get("status") == "ready"
        except ValueError:
            ready = False
    raise typer.Exit(0 if ready else 1)


@app.command()
def openapi(
    out_dir: Annotated[Path, typer.Option(help="Where to write <service>.json.")] = Path("openapi"),
) -> None:
    """Write the OpenAPI document of every service to OUT_DIR/<service>.json."""
    from tribunal.core.app import create_app
    from tribunal.core.registry import available_services, load_service

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
    from tribunal.core.registry import available_services
    from tribunal.core.settings import CoreSettings
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


@app.command()
def score(
    verifier: Annotated[str, typer.Argument(help="Verifier: math, code, judge, citation ...")],
    input_path: Annotated[
        str, typer.Argument(metavar="INPUT", help="JSONL of items; - reads standard input.")
    ],
    output: Annotated[
        str, typer.Option("--output", "-o", help="JSONL of results, in input order; - : stdout.")
    ] = "-",
    url: Annotated[
        str | None,
        typer.Option(
            help="Service URL (default: http://127.0.0.1 on TRIBUNAL_<NAME>_PORT, else the"
            " service's default port)."
        ),
    ] = None,
    api_key: Annotated[
        str | None, typer.Option(envvar="TRIBUNAL_API_KEY", help="Bearer token of the service.")
    ] = None,
    chunk_size: Annotated[int, typer.Option(min=1, help="Items per job.")] = 256,
    concurrency: Annotated[int, typer.Option(min=1, help="Jobs in flight.")] = 8,
    restart: Annotated[
        bool, typer.Option(help="Discard results already in OUTPUT and score everything.")
    ] = False,
) -> None:
    """Score a JSONL file of items through a running service, resumably.

    Each chunk is a job with an idempotency key derived from the input's content: after
    Ctrl-C, the same command keeps the results already written and scores only the rest.
    """
    from tribunal.cli.score import run_score

    code = run_score(
        verifier,
        input_path,
        output,
        url=url or _default_url(verifier),
        api_key=api_key,
        chunk_size=chunk_size,
        concurrency=concurrency,
        restart=restart,
    )
    # The process ends here: frozen, the objects its imports and its run made are not walked
    # again by the collections of interpreter shutdown (~50 ms of every run).
    gc.freeze()
    raise typer.Exit(code)


def _default_url(verifier: str) -> str:
    """``http://127.0.0.1:<port>`` of the verifier's service, on the port ``tribunal api``
    serves it: ``TRIBUNAL_<NAME>_PORT`` when set, else the default. Read without the
    settings classes, which would import every service's configuration."""
    from tribunal.wire.ports import env_port, local_url

    try:
        return local_url(verifier, env_port(verifier))
    except ValueError as exc:
        raise typer.BadParameter(f"{exc}; or give --url") from exc
    except KeyError as exc:
        raise typer.BadParameter(f"{exc.args[0]}; or give --url", param_hint="VERIFIER") from exc


@app.command()
def train(
    config: Annotated[
        Path, typer.Option(help="Trainer YAML (see trainer/tribunal/trainer/configs/).")
    ],
    output_dir: Annotated[Path, typer.Option(help="Checkpoints, metrics.jsonl, final/.")],
    max_steps: Annotated[int | None, typer.Option(help="Override the config's max_steps.")] = None,
) -> None:
    """Train a policy with GRPO on DeepSpeed ZeRO-3, rewards from the services (needs the
    package's trainer extra: torch, DeepSpeed, transformers, datasets)."""
    _require_trainer_extra("train")
    from tribunal.trainer.cli import train_command  # lazy: the services never import torch

    train_command(config, output_dir, max_steps)


@app.command()
def evaluate(
    config: Annotated[Path, typer.Option(help="Trainer YAML: dataset, sampling, rewards.")],
    model: Annotated[Path, typer.Option(help="A save_pretrained directory (a run's final/).")],
    n: Annotated[int, typer.Option(min=1, help="Completions per prompt.")] = 8,
    k: Annotated[list[int] | None, typer.Option(help="pass@k to report (repeatable).")] = None,
) -> None:
    """pass@1 / pass@k of a policy on the config's dataset, scored by its reward sources."""
    import json

    _require_trainer_extra("evaluate")

    from tribunal.trainer.config import GRPOConfig
    from tribunal.trainer.evaluate import evaluate as run_evaluation

    result = run_evaluation(GRPOConfig.from_yaml(config), model, n, k or [1, n])
    typer.echo(json.dumps(result))


data_app = typer.Typer(help="The public data sets (TRIBUNAL_DATA_DIR).", no_args_is_help=True)
app.add_typer(data_app, name="data")


@data_app.command("fetch")
def data_fetch(
    source: Annotated[
        str | None,
        typer.Option(
            "--from",
            help="A copy laid out as the data directory: a folder or an http(s) mirror "
            "(default: each file's public source at its pinned commit).",
        ),
    ] = None,
    into: Annotated[
        Path | None, typer.Option(help="Default: $TRIBUNAL_DATA_DIR, else ../shared/data.")
    ] = None,
) -> None:
    """Fetch the public data sets the docs, tutorial, benchmarks and tests read, each checked
    against its sha256 (a partial download resumes). Exit 1 when a file failed."""
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TaskID,
        TextColumn,
        TransferSpeedColumn,
    )

    from tribunal.cli.datasets import data_dir, fetch

    root = into if into is not None else data_dir()
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn())
    with Progress(*columns, TransferSpeedColumn(), transient=False) as bar:
        tasks: dict[str, TaskID] = {}

        class _Bar:
            def start(self, name: str, total_bytes: int | None, done_bytes: int) -> None:
                tasks[name] = bar.add_task(name, total=total_bytes, completed=done_bytes)

            def advance(self, name: str, nbytes: int) -> None:
                bar.advance(tasks[name], nbytes)

        done, failed = fetch(root, _Bar(), source)
    counts = {what: sum(1 for v in done.values() if v == what) for what in set(done.values())}
    summary = ", ".join(f"{n} {what}" for what, n in sorted(counts.items()))
    typer.echo(f"{root}: {summary or 'nothing'}; {len(failed)} failed", err=True)
    for line in failed:
        typer.echo(line, err=True)
    if failed:
        raise typer.Exit(1)


@data_app.command("path")
def data_path(
    files: Annotated[list[str], typer.Argument(help="Files under the data directory.")],
) -> None:
    """Print each file's path in the data directory; exit 2 with the command that gets it when
    one is not there."""
    from tribunal.cli.datasets import DataMissing, require

    try:
        root = require(*files)
    except DataMissing as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(2) from None
    for name in files:
        typer.echo(str(root / name))


@app.command()
def rescore(
    rollouts: Annotated[
        Path, typer.Argument(help="JSONL: the inspector's export, or rollouts with an id.")
    ],
    config: Annotated[
        list[str],
        typer.Option(help="A spec: a YAML file, or the name of a shipped spec. Given twice."),
    ],
    out: Annotated[
        Path | None, typer.Option(help="Where to write the diff (JSON); default: stdout.")
    ] = None,
    force: Annotated[
        bool, typer.Option(help="Re-score a spec that is not stateless all the same.")
    ] = False,
) -> None:
    """Score stored rollouts under two specs (A, B) and write the diff: each item whose
    reward changed, by class (up, down, error_a, error_b, both_error), with both specs'
    hashes. The verifiers are reached at TRIBUNAL_GATEWAY_*_URL. Exit 2 on a bad input or a
    spec that is not stateless (without --force)."""
    from tribunal.gateway import SpecError, load_spec_text, shipped_specs
    from tribunal.gateway.remote import ClientVerifiers
    from tribunal.gateway.rescore import read_rollouts, stateful_reasons
    from tribunal.gateway.rescore import rescore as rescore_items
    from tribunal.gateway.settings import GatewaySettings
    from tribunal.wire.errors import BadInput

    def fail(message: str) -> NoReturn:
        typer.echo(f"tribunal rescore: {message}", err=True)
        raise typer.Exit(2)

    if len(config) != 2:
        fail(f"--config: give exactly two specs (A and B), not {len(config)}")
    loaded = []
    try:
        for name in config:
            path = Path(name)
            if path.is_file():
                loaded.append(load_spec_text(path.read_text(), str(path)))
            elif name in (shipped := shipped_specs()):
                loaded.append(shipped[name])
            else:
                fail(f"--config: {name!r} is neither a spec file nor a shipped spec")
        with rollouts.open("rb") as lines:
            items = read_rollouts(lines)
    except (SpecError, BadInput, OSError) as exc:
        fail(str(exc))
    reasons = [r for spec in loaded for r in stateful_reasons(spec)]
    if reasons and not force:
        fail("re-scoring is not safe (" + "; ".join(reasons) + "): pass --force to do it anyway")
    settings = GatewaySettings()

    def client() -> ClientVerifiers:
        return ClientVerifiers(
            settings.gateway.verifier_urls(),
            settings.gateway.timeout_s,
            settings.api_key_value,
            max_retries=settings.gateway.retries,
        )

    diff = asyncio.run(rescore_items(items, loaded[0], loaded[1], client))
    text = json.dumps(diff, indent=1) + "\n"
    if out is None:
        typer.echo(text, nl=False)
    else:
        out.write_text(text)
    typer.echo(f"{diff['items']} items: {diff['classes']}", err=True)


# What `pip install 'tribunal-rl[trainer]'` adds and the trainer imports.
TRAINER_EXTRA = ("torch", "transformers", "deepspeed", "datasets")


def _require_trainer_extra(command: str) -> None:
    """Exit 2 with the install line when a package of the trainer extra is missing.

    Raises:
        typer.Exit: 2, after naming the missing packages and the extra that installs them.
    """
    import importlib

    missing = []
    for name in TRAINER_EXTRA:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        typer.echo(
            f"tribunal {command} needs the trainer extra (missing: {', '.join(missing)}): "
            "pip install 'tribunal-rl[trainer]'",
            err=True,
        )
        raise typer.Exit(2)


def main() -> None:
    """Run the ``tribunal`` command (the console script's entry point)."""
    # httpx imports its own command-line client (click, rich.syntax, pygments: ~70 ms of
    # every start) whenever those are installed, as typer and uvicorn make them. No
    # `tribunal` command runs `httpx.main`; a None entry makes that import fail, which
    # httpx handles by leaving its CLI out.
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
    app()
