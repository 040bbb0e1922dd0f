"""``tribunal up``: run every service's API and workers as child processes, in the foreground.

With Redis (``TRIBUNAL_REDIS_URL`` answers) each service gets an API process and its worker
processes. Without, each API process runs its workers in-process on the embedded queue.
Ctrl-C (or SIGTERM) stops every child: SIGTERM first, SIGKILL after a grace period.

A service that cannot start (a worker that refuses its configuration, such as a code worker
without a working sandbox, exits with ``EXIT_REFUSED``) does not take the others down: its
worker says why, the supervisor says once that the rest keeps running, and the service's
``/readyz`` reports the refusal. Any other death of a child stops the whole stack.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

import redis
import typer

from tribunal.core.service import ServiceSpec
from tribunal.core.settings import CoreSettings
from tribunal.core.worker_group import EXIT_REFUSED

__all__ = ["EXIT_REFUSED", "Supervisor", "redis_answers", "uses_redis"]


def say(line: str) -> None:
    """Print one line for the person who ran ``tribunal up``."""
    typer.echo(line)


def redis_answers(url: str, timeout_s: float = 1.0) -> bool:
    """True if a Redis server answers PING at ``url`` within ``timeout_s``."""
    client = redis.Redis.from_url(url, socket_connect_timeout=timeout_s, socket_timeout=timeout_s)
    try:
        return bool(client.ping())
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        return False
    finally:
        client.close()


def uses_redis(settings: CoreSettings) -> bool:
    """Whether processes started with ``settings`` queue through Redis: when a Redis URL was
    named (``TRIBUNAL_REDIS_URL``, or ``TRIBUNAL_QUEUE=redis``), even while it is down (the
    APIs answer 503 and the workers wait until it comes: never a silent fallback); with
    ``auto``, when one answers at the default URL."""
    return settings.queue != "memory" and (
        settings.redis_named or redis_answers(settings.redis_url)
    )


@dataclass
class Child:
    """A child process and what it is, for messages."""

    label: str
    process: subprocess.Popen[bytes]


class Supervisor:
    """Starts, watches and stops the stack.

    Args:
        specs: The services to run.
        settings: Core settings (Redis URL, host).
        grace_s: Time between SIGTERM and SIGKILL at shutdown (s).
    """

    def __init__(
        self, specs: list[ServiceSpec], settings: CoreSettings, grace_s: float = 10.0
    ) -> None:
        self.specs = specs
        self.settings = settings
        self.grace_s = grace_s
        self.children: list[Child] = []
        self._stop = False

    def request_stop(self) -> None:
        """Ask the watch loop to stop the stack (signal-safe)."""
        self._stop = True

    def run(self) -> int:
        """Start everything, wait for Ctrl-C or a child's death, stop everything.

        Returns:
            0 after a requested stop, 1 when a child died on its own.
        """
        use_redis = uses_redis(self.settings)
        if use_redis:
            say(f"queue: Redis at {self.settings.redis_url}")
        else:
            say(
                f"queue: no Redis answers at {self.settings.redis_url}; using the embedded "
                "in-process queue (single host, nothing survives a restart)"
            )
        try:
            self._start(use_redis)
            return self._watch()
        except KeyboardInterrupt:
            return 0
        finally:
            self._stop_children()

    def _start(self, use_redis: bool) -> None:
        queue = "redis" if use_redis else "memory"
        for spec in self.specs:
            settings = spec.settings()
            port = spec.port_of(settings)
            hint = spec.startup_hint(settings)
            if hint:
                say(f"{spec.name}: {hint}")
            env = {"TRIBUNAL_QUEUE": queue}
            self._spawn(f"{spec.name} api", ["api", spec.name, "--port", str(port)], env)
            if use_redis:
                # One command per service; it starts the service's worker processes itself.
                self._spawn(f"{spec.name} workers", ["worker", spec.name], env)
            say(
                f"{spec.name}: http://{settings.host}:{port}  (POST /v1/{spec.name}/score)"
                + (f", {_layout(spec, settings)}" if use_redis else "")
            )
        say("Ctrl-C stops everything.")

    def _spawn(self, label: str, args: list[str], env: dict[str, str]) -> None:
        argv = [sys.executable, "-m", "tribunal.cli", *args]
        # A session of its own: Ctrl-C reaches the children only through this supervisor,
        # which stops them in order.
        process = subprocess.Popen(argv, env={**os.environ, **env}, start_new_session=True)
        self.children.append(Child(label, process))

    def _watch(self) -> int:
        watched = list(self.children)
        while not self._stop:
            for child in list(watched):
                code = child.process.poll()
                if code is None:
                    continue
                if code != EXIT_REFUSED:
                    say(f"{child.label} exited with code {code}; stopping the stack")
                    return 1
                watched.remove(child)
                say(f"{child.label} refused to start (why: above); the other services keep running")
            time.sleep(0.2)
        return 0

    def _stop_children(self) -> None:
        for child in self.children:
            if child.process.poll() is None:
                child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.grace_s
        for child in self.children:
            try:
                child.process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                # Its whole process group: a worker command's members are in it too.
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.process.pid, signal.SIGKILL)
                child.process.wait()
        if self.children:
            say("stopped")


def _layout(spec: ServiceSpec, settings: CoreSettings) -> str:
    """``4 workers x 4 processes`` (math), ``1 worker x 2 slots`` (code), ``1 worker``."""
    workers = spec.workers_of(settings)
    group = getattr(settings, spec.name, None)
    pools = [("processes", "processes"), ("slots", "sandbox slots")]
    for field, noun in pools:
        size = getattr(group, field, None)
        if isinstance(size, int):
            return f"{workers} worker{'s' if workers > 1 else ''} x {size} {noun}"
    return f"{workers} worker{'s' if workers > 1 else ''}"
