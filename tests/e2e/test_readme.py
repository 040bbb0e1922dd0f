"""The examples of the README and of the docs (``docs/**/*.md``) work as written: every curl
command against ``tribunal up``, and the README's trainer line."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.conftest import (
    DATA,
    ROOT,
    RunningService,
    free_port,
    need_data,
    stop_tree,
    wait_ready,
)
from tribunal.wire.ports import PORTS

pytestmark = pytest.mark.e2e


PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def sh_blocks(page: Path) -> list[str]:
    """The text of one page's ``sh`` code blocks."""
    return re.findall(r"```sh\n(.*?)```", page.read_text(), re.S)


def page_curl_commands(page: Path) -> list[str]:
    """The ``curl`` commands of one page's sh blocks, continuation lines joined, but those of
    the environments server (``python -m tribunal.envs``, port 8105), which neither ``tribunal
    up`` nor compose.yaml runs: tests/envs/ runs its examples against it."""
    commands = []
    for block in sh_blocks(page):
        joined = block.replace("\\\n", "")
        commands += [
            line.strip()
            for line in joined.splitlines()
            if line.strip().startswith("curl ") and ":8105/" not in line
        ]
    return commands


GETTING_STARTED = ROOT / "docs" / "getting-started.md"


def page_steps(page: Path) -> list[tuple[str, str]]:
    """A page's examples in page order: ``("curl", command)`` for each command of an sh block
    of curl commands alone, ``("sh", block)`` for another sh block (``make`` blocks, which
    start the stack a test runs itself, left out), ``("python", code)`` per python block."""
    steps: list[tuple[str, str]] = []
    for language, block in re.findall(r"```(sh|python)\n(.*?)```", page.read_text(), re.S):
        if language == "python":
            steps.append(("python", block))
            continue
        lines = [line.strip() for line in block.replace("\\\n", "").splitlines()]
        commands = [line for line in lines if line and not line.startswith("#")]
        if all(command.startswith("curl ") for command in commands):
            steps += [("curl", command) for command in commands]
        elif not any(command.startswith("make ") for command in commands):
            steps.append(("sh", block))
    return steps


def curl_commands() -> list[str]:
    """Every ``curl`` command of the README and the docs, page by page."""
    return [command for page in PAGES for command in page_curl_commands(page)]


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_readme_curl_examples(tmp_path: Path, key_prefix: str) -> None:
    """Every curl example of the pages against ``tribunal up`` with all five ports moved
    (TRIBUNAL_<SERVICE>_PORT alone: the gateway's verifier URLs follow them), while listeners
    on the default ports (where free) record every connection: they get none."""
    ports = {port: str(free_port()) for port in ("8100", "8101", "8102", "8103", "8104")}
    listeners = listen_where_free()
    # The embedded queue, as `make up` runs on a machine without Redis (a TRIBUNAL_REDIS_URL
    # that was set would be waited for, never replaced by it).
    env = {
        **{k: v for k, v in os.environ.items() if k != "TRIBUNAL_REDIS_URL"},
        "TRIBUNAL_MATH_PORT": ports["8101"],
        "TRIBUNAL_CODE_PORT": ports["8102"],
        "TRIBUNAL_JUDGE_PORT": ports["8103"],
        "TRIBUNAL_CITATION_PORT": ports["8104"],
        "TRIBUNAL_GATEWAY_PORT": ports["8100"],
        "TRIBUNAL_QUEUE": "memory",
        "TRIBUNAL_KEY_PREFIX": key_prefix,
    }
    with (tmp_path / "up.log").open("wb") as log:
        up = subprocess.Popen(
            [sys.executable, "-m", "tribunal.cli", "up"],
            env=env,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        for port in ports.values():
            wait_ready(f"http://127.0.0.1:{port}", 60, {"tribunal up": up})
        job_id = None
        by_page: dict[str, list[dict[str, Any]]] = {}
        # Getting started runs top to bottom as one script: its curl commands, Python
        # examples and `tribunal score` block in page order, against one stack (a key that
        # an earlier example used would be a 409 here). Other pages: their curl commands.
        for page in PAGES:
            steps = (
                page_steps(page)
                if page == GETTING_STARTED
                else [("curl", command) for command in page_curl_commands(page)]
            )
            for kind, text in steps:
                for documented, actual in ports.items():
                    for host in ("localhost", "127.0.0.1"):
                        text = text.replace(f"{host}:{documented}", f"{host}:{actual}")
                if kind == "python":
                    run_example([sys.executable, "-c", text], tmp_path)
                    continue
                if kind == "sh":
                    need_data(DATA / "math" / "gsm8k_test.jsonl")
                    text = text.replace("../shared/data", str(DATA))
                    tribunal = f'tribunal() {{ "{sys.executable}" -m tribunal.cli "$@"; }}\n'
                    run_example(["bash", "-euo", "pipefail", "-c", tribunal + text], tmp_path)
                    continue
                if "<id>" in text:
                    assert job_id is not None
                    text = text.replace("<id>", job_id)
                answer = json.loads(run_example(["bash", "-c", text], tmp_path))
                job_id = answer.get("job_id", job_id)
                by_page.setdefault(str(page.relative_to(ROOT)), []).append(answer)
        scored = [
            json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()
        ]
        assert len(scored) == 1319 and all(r["reward"] == 1.0 for r in scored)
        [readme_math] = by_page.pop("README.md")
        assert readme_math["results"][0]["reward"] == 1.0
        answers = by_page.pop("docs/getting-started.md") + by_page.pop("docs/gateway.md")
        answers += by_page.pop("docs/integrations.md")
        (
            math,
            job,
            polled,
            code,
            run,
            raw,
            judge,
            citation,
            failed,
            error,
            mixed,
            specs,
            openrlhf,
        ) = answers
        assert math["results"][0]["reward"] == 1.0
        assert math["results"][0]["details"]["extracted_answer"] == "\\frac{1}{2}"
        assert job["created"] is True
        assert polled["status"] == "done" and [r["reward"] for r in polled["results"]] == [1.0, 1.0]
        assert code["results"][0]["reward"] == 1.0 and code["results"][0]["details"]["all_passed"]
        assert run["stdout"] == "45\n" and run["exit_code"] == 0 and run["verdict"] == "accepted"
        assert raw["results"][0]["reward"] == 1.0
        assert (
            raw["results"][0]["details"]["extracted_code"] == "def add(a, b):\n    return a + b\n"
        )
        assert judge["results"][0]["error"]["code"] == "backend_unavailable"
        [result] = failed["results"]
        assert result["reward"] is None and result["error"]["field"] == "items.0.ground_truth"
        assert error["error"]["field"] == "items"
        cited = citation["results"][0]
        assert cited["reward"] == pytest.approx(5 / 6) and cited["details"]["precision"] == 0.75
        direct, tcr, refiner = mixed["results"]
        assert direct["reward"] == 1.0 and direct["verifier"]["name"] == "math"
        # wrong, with one typed tool call that no tool response answered: no turn is counted
        assert tcr["reward"] == pytest.approx(-1.0)
        turns = tcr["details"]["sub_rewards"]["num_turns"]["details"]
        assert (turns["tool_calls"], turns["typed_tool_calls"], turns["source"]) == (
            0,
            1,
            "unknown",
        )
        assert refiner["reward"] is None
        assert refiner["error"]["code"] == "backend_unavailable"
        assert "rloo_math" in {spec["name"] for spec in specs["specs"]}
        assert openrlhf == {
            "rewards": [1.0, 0.0],
            "scores": [1.0, 0.0],
            "extra_logs": {"math": [1.0, 0.0], "undecided": [0.0, 0.0], "failed": [0.0, 0.0]},
            "errors": [],
        }
        # Any other page's examples: each answers a JSON body.
        assert all(isinstance(a, dict) for page in by_page.values() for a in page), by_page
        # The gateway can score math and code; judge and citation have no backend here, and
        # it says so (their own reasons, under their names).
        gateway = f"http://127.0.0.1:{ports['8100']}"
        ready = httpx.get(f"{gateway}/readyz", timeout=30).json()
        assert ready["status"] == "degraded"
        assert [reason.split(":")[0] for reason in ready["reasons"]] == ["judge", "citation"]
        check = [sys.executable, "-m", "tribunal.cli", "healthcheck", "gateway"]
        assert subprocess.run(check, env=env, capture_output=True).returncode == 0
        # A container's probe: the port from the environment, no service imported (a
        # verifier's imports outlast a 5 s healthcheck timeout on a loaded host).
        probe = [sys.executable, "-X", "importtime", "-m", "tribunal.cli", "healthcheck", "math"]
        done = subprocess.run(probe, env=env, capture_output=True, text=True)
        assert done.returncode == 0 and f":{ports['8101']}/readyz: 200" in done.stdout
        imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines()}
        assert "tribunal.wire.ports" in imported
        assert not imported & {"fastapi", "sympy", "math_verify", "tribunal.math"}, imported
        strict = subprocess.run([*check, "--strict"], env=env, capture_output=True)
        assert strict.returncode == 1
    finally:
        stop_tree(up)
        print((tmp_path / "up.log").read_text())
    assert connections(listeners) == {}
    urls = ", ".join(
        f"{name} http://127.0.0.1:{ports[port]}"
        for name, port in (("math", "8101"), ("code", "8102"), ("judge", "8103"))
    )
    banner = f"gateway: verifiers at {urls}, citation http://127.0.0.1:{ports['8104']}"
    assert banner in (tmp_path / "up.log").read_text()


def listen_where_free() -> dict[int, socket.socket]:
    """A listening socket on each default port nobody on this host holds. A port another
    process holds (a stack of someone else's on a shared host) is left out: the banner's
    URLs are then what shows that the gateway does not call it."""
    listeners = {}
    for port in PORTS.values():
        listener = socket.socket()
        try:
            listener.bind(("127.0.0.1", port))
        except OSError:
            listener.close()
            continue
        listener.listen(64)
        listener.setblocking(False)
        listeners[port] = listener
    return listeners


def connections(listeners: dict[int, socket.socket]) -> dict[int, int]:
    """The connections each listener received (accepted now from its backlog), then close it."""
    calls: dict[int, int] = {}
    for port, listener in listeners.items():
        with contextlib.suppress(BlockingIOError):
            while True:
                listener.accept()[0].close()
                calls[port] = calls.get(port, 0) + 1
        listener.close()
    return calls


def run_example(argv: list[str], cwd: Path) -> str:
    """Run one example of a page; return its standard output (it must exit 0)."""
    run = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=cwd)
    assert run.returncode == 0, (argv[-1], run.stdout[-2000:], run.stderr[-2000:])
    return run.stdout


def test_readme_trainer_line(service: Callable[..., RunningService], tmp_path: Path) -> None:
    """The README's `tribunal train` line, one step, its shipped config as it is: its reward
    URL follows TRIBUNAL_MATH_PORT to a math service on a free port."""
    [line] = [
        line
        for block in sh_blocks(ROOT / "README.md")
        for line in block.splitlines()
        if " train " in line
    ]
    argv = shlex.split(line)
    assert argv[:2] == [".venv/bin/tribunal", "train"]
    options = dict(zip(argv[2::2], argv[3::2], strict=True))
    shipped = ROOT / options["--config"]
    [source] = yaml.safe_load(shipped.read_text())["reward_sources"]
    assert source["url"] == "http://127.0.0.1:${TRIBUNAL_MATH_PORT:-8101}"
    math = service("math", env={"TRIBUNAL_QUEUE": "memory", "TRIBUNAL_MATH_PROCESSES": "1"})
    port = str(httpx.URL(math.base_url).port)
    out = tmp_path / options["--output-dir"]
    command = [sys.executable, "-m", "tribunal.cli", "train", "--config", str(shipped)]
    done = subprocess.run(
        [*command, "--output-dir", str(out), "--max-steps", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TRIBUNAL_MATH_PORT": port},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    [step] = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert step["step"] == 1 and step["reward/scored_fraction"] == 1.0
    assert (out / "final" / "config.json").exists()
