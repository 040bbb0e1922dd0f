"""compose.yaml's stack in containers: image builds, start-up, sizes, and math throughput
through the containers against the same through ``make up`` (``tribunal up`` processes).

Run: ``bash -c '. scripts/compose-env.sh && .venv/bin/python bench/compose.py'`` (as root,
with podman; compose-env.sh sets podman up and picks the base images, as for
``make compose-test``). Prints one JSON object. In one run:

- where the base images are local (no registry reachable), the seconds to build them again;
- each image built cold (its layers gone, as on a fresh machine; the code image reuses the
  dependency layers the services image built), then warm (nothing changed: all cached);
- each image's size, as ``podman image inspect`` reports it (uncompressed);
- seconds from ``podman-compose up -d`` until every published service's ``/readyz`` is 200;
- the math benchmark of ``bench/math_throughput.py`` (GSM8K and MATH-500 gold solutions,
  first pass: every input new) against the math container and against ``tribunal up`` on
  this host with its own throwaway Redis, both up at once and measured in turn on two halves
  of the data (A B B A). Both
  sides: one API process, one worker with one verification process per core, 8 requests of
  256 items in flight, after a warm-up, result cache off (``TRIBUNAL_CACHE_TTL_S=0``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import results
from bench._stack import ROOT, free_port, redis_server, tribunal, wait_ready
from bench.containers import Stack, environment, run, running
from bench.math_throughput import _warm_up, load_items, service_throughput

PROJECT = "tribunal-compose-bench"


def local_base_seconds() -> float | None:
    """Seconds to build the local base images again, or None when the official ones are used."""
    if not os.environ.get("TRIBUNAL_BASE_IMAGE", "").startswith("localhost/tribunal-base"):
        return None
    start = time.monotonic()
    run([str(ROOT / "scripts" / "compose-base.sh"), "--rebuild"], timeout_s=1200)
    return round(time.monotonic() - start, 1)


def image_mb(image: str) -> float:
    """An image's uncompressed size in MB (10^6 bytes)."""
    size = run(["podman", "image", "inspect", "--format", "{{.Size}}", image])
    return round(int(size) / 1e6, 1)


def math_items_per_s(base_url: str, half: int) -> dict[str, tuple[int, float]]:
    """Items and seconds of one half of each math data set (every other item, from ``half``)
    against one service URL, after a warm-up."""
    asyncio.run(_warm_up(base_url))
    measured = {}
    for name, items in load_items().items():
        part = items[half::2]
        rate = asyncio.run(service_throughput(base_url, part, 1))["first_pass_items_per_s"]
        measured[name] = (len(part), len(part) / rate)
    return measured


@contextlib.contextmanager
def make_up() -> Iterator[str]:
    """``tribunal up`` (what ``make up`` runs) with a throwaway Redis; yields the math URL."""
    with redis_server() as redis_url:
        port = free_port()
        env = {
            **os.environ,
            "TRIBUNAL_REDIS_URL": redis_url,
            "TRIBUNAL_MATH_PORT": str(port),
            "TRIBUNAL_CODE_PORT": str(free_port()),
            "TRIBUNAL_JUDGE_PORT": str(free_port()),
            "TRIBUNAL_LOG_LEVEL": "WARNING",
            "TRIBUNAL_CACHE_TTL_S": "0",
        }
        # Niced as podman-compose is (tests/e2e/containers.py), which the containers inherit.
        up = subprocess.Popen(
            ["nice", "-n", "10", *tribunal("up")],
            env=env,
            cwd=ROOT,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_ready(f"http://127.0.0.1:{port}", 120)
            yield f"http://127.0.0.1:{port}"
        finally:
            os.killpg(up.pid, 15)
            up.wait(30)


def main() -> None:
    # No options; a parser all the same, so that --help describes the run instead of starting it.
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    report: dict[str, Any] = {
        "command": "bash -c '. scripts/compose-env.sh && .venv/bin/python bench/compose.py'",
        "cores": os.cpu_count(),
        "environment": environment(),
    }
    report["local_base_images_build_s"] = local_base_seconds()
    with tempfile.TemporaryDirectory() as directory:
        stack = Stack(Path(directory), PROJECT, {"TRIBUNAL_CACHE_TTL_S": "0"})
        images = stack.built_services()
        # Cold: the images and their layers gone (a rebuilt base invalidates them anyway), as
        # on a fresh machine; the second image reuses the dependency layers the first built.
        subprocess.run(["podman", "rmi", "--force", *images], capture_output=True)
        run(["podman", "image", "prune", "--force"])
        report["build_cold_s"] = {
            image: round(stack.build(service), 1) for image, service in images.items()
        }
        report["build_warm_s"] = {
            image: round(stack.build(service), 1) for image, service in images.items()
        }
        sizes = [*images, *(v for k, v in environment().items() if k.endswith("_IMAGE"))]
        report["image_size_mb"] = {image: image_mb(image) for image in sizes}
        with running(stack, ready_timeout_s=300) as ready_s, make_up() as math_url:
            report["up_to_ready_s"] = round(ready_s, 1)
            # Both stacks up (idle but for heartbeats) and measured in turn on two halves of
            # the data, A B B A: the load of the shared machine drifts more than the stacks
            # differ. Each half is new to each stack's verification processes.
            urls = {"containers": stack.url(8101), "make_up": math_url}
            order = [("containers", 0), ("make_up", 0), ("make_up", 1), ("containers", 1)]
            totals: dict[str, dict[str, list[float]]] = {side: {} for side in urls}
            for side, half in order:
                for name, (n, seconds) in math_items_per_s(urls[side], half).items():
                    total = totals[side].setdefault(name, [0.0, 0.0])
                    total[0] += n
                    total[1] += seconds
            for side, by_name in totals.items():
                report[f"math_items_per_s_{side}"] = {
                    name: round(n / seconds, 1) for name, (n, seconds) in by_name.items()
                }
    print(json.dumps(report, indent=2))
    results.record(
        "compose",
        report,
        tables(report),
        note=f"run as `{report['command']}` (podman and the base images set up first)",
    )


def tables(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The docs' tables: seconds to build and start, each image's size, and math items/s
    through the containers against ``tribunal up``."""
    steps: list[list[object]] = []
    if report["local_base_images_build_s"] is not None:
        steps.append(
            [
                "local base images (debootstrap, import, Redis image)",
                report["local_base_images_build_s"],
            ]
        )
    steps += [[f"`{image}`, cold", s] for image, s in report["build_cold_s"].items()]
    steps += [
        [f"`{image}`, warm (nothing changed)", s] for image, s in report["build_warm_s"].items()
    ]
    steps.append(
        [
            "`podman-compose up -d` until every published service's `/readyz` answers 200",
            report["up_to_ready_s"],
        ]
    )
    containers = report["math_items_per_s_containers"]
    host = report["math_items_per_s_make_up"]
    return [
        results.table(["step", "seconds"], steps),
        results.table(
            ["image", "size, MB (uncompressed)"],
            [[f"`{image}`", f"{mb:,.1f}"] for image, mb in report["image_size_mb"].items()],
        ),
        results.table(
            ["math data set", "containers, items/s", "`tribunal up`, items/s"],
            [[name, f"{containers[name]:,.0f}", f"{host[name]:,.0f}"] for name in containers],
        ),
    ]


if __name__ == "__main__":
    main()
