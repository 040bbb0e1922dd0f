"""compose.yaml's stack in real containers, through podman-compose (``make compose-test``).

Used by ``bench/compose.py`` and ``tests/e2e/test_compose.py`` (tests import bench's
helpers, never the other way). The stack runs under a
project name of its own, with every published port moved to a free host port (Redis is not
published), so it runs beside a ``make up`` stack and the system Redis. Services of a
profile (``gpu``, ``monitoring``) are left out. ``scripts/compose-test.sh`` sets the
environment: podman's ``CONTAINERS_CONF``, and ``TRIBUNAL_BASE_IMAGE`` /
``TRIBUNAL_REDIS_IMAGE`` where the official images cannot be pulled.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from tribunal.testing.stack import free_port

ROOT = Path(__file__).resolve().parents[1]
PROJECT = "tribunal-compose-test"
LABEL = "com.docker.compose.project"


def podman_compose() -> list[str]:
    """podman-compose from this interpreter's environment (PyPI's; Debian's 1.0.3 leaves
    ``${VAR:-}`` unexpanded)."""
    return [str(Path(sys.executable).parent / "podman-compose")]


def derive(document: dict[str, Any]) -> tuple[dict[str, Any], dict[int, int]]:
    """compose.yaml without its profiles (``gpu``, ``monitoring``), build contexts made
    absolute and every published port moved to a free host port.

    Returns:
        The derived document and ``{container port: host port}``.
    """
    derived = json.loads(json.dumps(document))
    ports: dict[int, int] = {}
    services = derived["services"]
    for name in [n for n, s in services.items() if s.get("profiles")]:
        del services[name]
    for service in services.values():
        if "build" in service:
            service["build"]["context"] = str(ROOT / service["build"]["context"])
        published = []
        for entry in service.get("ports", []):
            container_port = int(str(entry).rsplit(":", 1)[1])
            ports.setdefault(container_port, free_port())
            published.append(f"127.0.0.1:{ports[container_port]}:{container_port}")
        if published:
            service["ports"] = published
    used = {v.split(":")[0] for s in services.values() for v in s.get("volumes", [])}
    derived["volumes"] = {k: v for k, v in (derived.get("volumes") or {}).items() if k in used}
    return derived, ports


def run(argv: list[str], timeout_s: float = 600) -> str:
    """Run a command (niced: the machine is shared); its stdout, or an error with its output."""
    done = subprocess.run(
        ["nice", "-n", "10", *argv], capture_output=True, text=True, timeout=timeout_s
    )
    if done.returncode != 0:
        raise RuntimeError(f"{argv} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done.stdout


@dataclass
class Stack:
    """The derived compose file of one project, and what runs from it.

    Attributes:
        directory: Where the derived ``compose.yaml`` is written.
        project: The compose project name (containers, network and volumes carry it).
        env: Variables added to the environment of every service built from compose's
            ``x-tribunal-env`` (those with ``TRIBUNAL_REDIS_URL``).
    """

    directory: Path
    project: str = PROJECT
    env: dict[str, str] = field(default_factory=dict)
    document: dict[str, Any] = field(init=False)
    ports: dict[int, int] = field(init=False)

    def __post_init__(self) -> None:
        source = yaml.safe_load((ROOT / "compose.yaml").read_text())
        self.document, self.ports = derive(source)
        for service in self.document["services"].values():
            if "TRIBUNAL_REDIS_URL" in (service.get("environment") or {}):
                service["environment"].update(self.env)
        (self.directory / "compose.yaml").write_text(yaml.safe_dump(self.document))

    def compose(self, *args: str, timeout_s: float = 600) -> str:
        """Run ``podman-compose -p <project> -f <derived file> <args>``."""
        file = str(self.directory / "compose.yaml")
        return run([*podman_compose(), "-p", self.project, "-f", file, *args], timeout_s)

    def built_services(self) -> dict[str, str]:
        """``{image: first service that builds it}``."""
        images: dict[str, str] = {}
        for name, service in self.document["services"].items():
            if "build" in service:
                images.setdefault(service["image"], name)
        return images

    def build(self, service: str) -> float:
        """Build one service's image; seconds taken."""
        start = time.monotonic()
        self.compose("build", service, timeout_s=1200)
        return time.monotonic() - start

    def url(self, container_port: int) -> str:
        """The host URL of a published container port."""
        return f"http://127.0.0.1:{self.ports[container_port]}"

    def containers(self) -> dict[str, list[str]]:
        """``{service: [container name, ...]}`` of this project, running or not."""
        listed = json.loads(
            run(
                [
                    "podman",
                    "ps",
                    "-a",
                    "--filter",
                    f"label={LABEL}={self.project}",
                    "--format",
                    "json",
                ]
            )
        )
        found: dict[str, list[str]] = {}
        for container in listed:
            service = container["Labels"]["com.docker.compose.service"]
            found.setdefault(service, []).extend(container["Names"])
        return found

    def wait_ready(self, timeout_s: float) -> float:
        """Poll every published service's ``/readyz`` until all answer 200; seconds taken.

        Raises:
            TimeoutError: naming the services not ready, and any container not running.
        """
        start = time.monotonic()
        waiting = {port: self.url(port) for port in self.ports}
        while waiting and time.monotonic() - start < timeout_s:
            for port, url in list(waiting.items()):
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                        del waiting[port]
            time.sleep(0.2)
        if waiting:
            states = run(["podman", "ps", "-a", "--filter", f"label={LABEL}={self.project}"])
            raise TimeoutError(f"not ready in {timeout_s} s: {sorted(waiting)}\n{states}")
        return time.monotonic() - start

    def logs(self) -> str:
        """The last lines of every container's log."""
        parts = []
        for names in self.containers().values():
            for name in names:
                done = subprocess.run(
                    ["podman", "logs", "--tail", "40", name], capture_output=True, text=True
                )
                parts.append(f"--- {name}\n{done.stdout}{done.stderr}")
        return "\n".join(parts)

    def leftovers(self) -> dict[str, list[str]]:
        """Containers, networks and volumes of this project that still exist."""
        label = f"label={LABEL}={self.project}"
        return {
            kind: run(["podman", kind, *listing, "--filter", label, "--format", fmt]).split()
            for kind, listing, fmt in (
                ("ps", ["-a"], "{{.Names}}"),
                ("network", ["ls"], "{{.Name}}"),
                ("volume", ["ls"], "{{.Name}}"),
            )
        }

    def down(self) -> None:
        """``down -v``: containers, network and volumes go."""
        self.compose("down", "-v", "-t", "5", timeout_s=300)


@contextlib.contextmanager
def running(stack: Stack, ready_timeout_s: float = 300) -> Iterator[float]:
    """Bring the stack up and wait until it is ready; yields the seconds from ``up`` to ready.
    Brings it down afterwards, printing the containers' logs (to stderr) first."""
    start = time.monotonic()
    try:
        stack.compose("up", "-d", timeout_s=600)
        stack.wait_ready(ready_timeout_s)
        yield time.monotonic() - start
    finally:
        with contextlib.suppress(Exception):
            print(stack.logs(), file=sys.stderr)
        stack.down()


def environment() -> dict[str, str]:
    """The variables ``scripts/compose-test.sh`` sets, for the record."""
    names = ("CONTAINERS_CONF", "TRIBUNAL_BASE_IMAGE", "TRIBUNAL_REDIS_IMAGE")
    return {name: os.environ[name] for name in names if name in os.environ}
