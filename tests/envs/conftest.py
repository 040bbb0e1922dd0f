"""One running stack for the protocol tests of this folder: the math service (embedded queue),
the code service (Redis and a worker: the interpreter sessions), an environment server with an
API key in front of them, and a second one whose math service is gone (a verifier that fails)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT, RedisServer, need_data, redis_env, stop_tree
from tribunal.testing.stack import free_port, start_process, start_service, wait_ready

KEY = "envs-test-key"
MEMORY = {"TRIBUNAL_QUEUE": "memory", "TRIBUNAL_MATH_PROCESSES": "1"}


def docs_examples(marker: str) -> list[str]:
    """The python blocks of docs/integrations.md that contain ``marker``, in page order."""
    page = (ROOT / "docs" / "integrations.md").read_text()
    return [b for b in re.findall(r"```python\n(.*?)```", page, re.S) if marker in b]


def run_docs_example(python: Path, example: str, url: str) -> None:
    """Run one docs example as written in a client's own venv (``python``), with the
    documented server (``http://127.0.0.1:8105``, key ``<key>``) swapped for the stack's."""
    example = example.replace("http://127.0.0.1:8105", url).replace("<key>", KEY)
    ran = subprocess.run([str(python), "-c", example], capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr


@dataclass(frozen=True)
class EnvsStack:
    """The running environment servers.

    Attributes:
        url: The server in front of the math and code services (``KEY`` required).
        broken_url: A server whose math service cannot be reached (no key).
        log: The first server's log.
    """

    url: str
    broken_url: str
    log: Path


def client_python(name: str, python: str | None = None) -> Path:
    """The venv of a protocol's client (``openreward``, ``openenv``, ``nemo-gym``), built once
    from its lock by ``scripts/protocol_envs.sh`` (``python``: the interpreter to build it on)."""
    env = None if python is None else {**os.environ, "PYTHON": python}
    subprocess.run([str(ROOT / "scripts" / "protocol_envs.sh"), "venv", name], check=True, env=env)
    return ROOT / f".venv-{name}" / "bin" / "python"


def run_driver(
    python: Path, script: str, *args: str, log: Path
) -> subprocess.CompletedProcess[str]:
    """Run ``tests/envs/<script>`` in a client's venv; fail with its stderr and the server's
    log if it fails."""
    done = subprocess.run(
        [str(python), str(ROOT / "tests" / "envs" / script), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr + log.read_text()
    return done


@pytest.fixture(scope="session")
def envs_stack(
    redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EnvsStack]:
    """The stack, started once for the folder's tests."""
    need_data(ROOT.parent / "shared" / "data" / "math" / "gsm8k_test.jsonl")
    tmp = tmp_path_factory.mktemp("envs")
    # A 2 s deadline: the power towers some tests submit time out sooner (default 5 s).
    math = start_service("math", env={**MEMORY, "TRIBUNAL_MATH_TIMEOUT_S": "2"}, log_dir=tmp)
    code = start_service("code", env=redis_env(redis_server, f"envs{free_port()}"), log_dir=tmp)
    port, broken_port = free_port(), free_port()
    argv = [sys.executable, "-m", "tribunal.envs", "--port"]
    servers = [
        start_process(
            [*argv, str(port)],
            {
                "TRIBUNAL_ENVS_MATH_URL": math.base_url,
                "TRIBUNAL_ENVS_CODE_URL": code.base_url,
                "TRIBUNAL_API_KEY": KEY,
            },
            tmp / "envs.log",
        ),
        start_process(
            [*argv, str(broken_port)],
            {
                "TRIBUNAL_ENVS_MATH_URL": f"http://127.0.0.1:{free_port()}",
                "TRIBUNAL_ENVS_CODE_URL": code.base_url,
                "TRIBUNAL_ENVS_MAX_RETRIES": "0",
            },
            tmp / "broken.log",
        ),
    ]
    try:
        stack = EnvsStack(
            f"http://127.0.0.1:{port}", f"http://127.0.0.1:{broken_port}", tmp / "envs.log"
        )
        wait_ready(stack.url, 30, {"envs": servers[0]}, path="/health")
        wait_ready(stack.broken_url, 30, {"broken": servers[1]}, path="/health")
        yield stack
    finally:
        for server in servers:
            stop_tree(server)
        math.stop()
        code.stop()
