"""compose.yaml is valid Compose and its commands work, run here as local processes.

No Docker engine runs here, so each service's ``command`` (and its healthcheck) runs as a
local process with the compose environment, the host names mapped to 127.0.0.1 and ports
moved to free ones. The ``gpu`` profile (vLLM) cannot run on this machine and is skipped.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
import yaml

from tests.conftest import FIXTURES, ROOT, free_port, start_process, stop_process, wait_ready

pytestmark = pytest.mark.e2e

SCHEMA = FIXTURES / "compose-spec.json"
_VARIABLE = re.compile(r"\$\{(\w+)(?::?-([^}]*))?\}")


def compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())
    return document


def interpolate(value: str) -> str:
    """Compose's ``${VAR:-default}`` with an empty environment: the defaults."""
    return _VARIABLE.sub(lambda m: m.group(2) or "", value)


def local_env(service: dict[str, Any], hosts: dict[str, str]) -> dict[str, str]:
    env = {}
    for key, value in (service.get("environment") or {}).items():
        text = interpolate(str(value))
        for host, address in hosts.items():
            text = text.replace(host, address)
        env[key] = text
    return env


def tribunal_argv(command: list[str]) -> list[str]:
    assert command[0] == "tribunal", command
    return [sys.executable, "-m", "tribunal.core.cli", *command[1:]]


def test_compose_file_follows_the_compose_specification() -> None:
    schema = json.loads(SCHEMA.read_text())
    # The file names its draft without the trailing "#", which jsonschema does not resolve.
    validator = jsonschema.Draft7Validator(schema)
    validator.validate(compose())
    broken = compose()
    broken["services"]["math"]["comand"] = ["tribunal", "api", "math"]
    assert not validator.is_valid(broken), "the schema must catch a malformed field"


def test_ports_and_images_agree_with_the_services() -> None:
    from tribunal.core.registry import load_service

    services = compose()["services"]
    for name in ("math", "code", "judge", "citation", "gateway"):
        container_port = services[name]["ports"][0].rsplit(":", 1)[1]
        assert int(container_port) == load_service(name).port
        assert services[name]["command"] == ["tribunal", "api", name]
        assert services[f"{name}-worker"]["command"] == ["tribunal", "worker", name]
    assert "gpu" in services["vllm"]["profiles"]


def test_every_command_runs_as_a_local_process(tmp_path: Path, key_prefix: str) -> None:
    from tribunal.core.registry import load_service

    services = compose()["services"]
    redis_port, vllm_port = free_port(), free_port()
    hosts = {"redis:6379": f"127.0.0.1:{redis_port}", "vllm:8000": f"127.0.0.1:{vllm_port}"}
    redis_command = [interpolate(part) for part in services["redis"]["command"]]
    started = [
        start_process(
            [
                *redis_command,
                "--port",
                str(redis_port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(tmp_path),
            ],
            {},
            tmp_path / "redis.log",
        )
    ]
    ports: dict[str, int] = {}
    try:
        time.sleep(0.3)
        for name, service in services.items():
            if name == "redis" or "gpu" in service.get("profiles", []):
                continue
            env = local_env(service, hosts) | {
                "TRIBUNAL_HOST": "127.0.0.1",
                "TRIBUNAL_KEY_PREFIX": key_prefix,
            }
            base = name.removesuffix("-worker")
            ports.setdefault(base, free_port())
            # The gateway reaches the verifiers by host name: map those started so far.
            hosts |= {f"{n}:{load_service(n).port}": f"127.0.0.1:{p}" for n, p in ports.items()}
            env[f"TRIBUNAL_{base.upper()}_PORT"] = str(ports[base])
            started.append(
                start_process(tribunal_argv(service["command"]), env, tmp_path / f"{name}.log")
            )
        for name in ("math", "code", "judge", "citation", "gateway"):
            wait_ready(f"http://127.0.0.1:{ports[name]}", 60, {})
            check = [interpolate(part) for part in services[name]["healthcheck"]["test"][1:]]
            env = {**os.environ, f"TRIBUNAL_{name.upper()}_PORT": str(ports[name])}
            result = subprocess.run(tribunal_argv(check), env=env, capture_output=True, timeout=30)
            assert result.returncode == 0, result.stderr
        body = {"items": [{"id": "q", "response": "\\boxed{\\frac{1}{2}}", "ground_truth": "0.5"}]}
        answer = httpx.post(
            f"http://127.0.0.1:{ports['math']}/v1/math/score", json=body, timeout=30
        )
        assert answer.json()["results"][0]["reward"] == 1.0
        through = httpx.post(
            f"http://127.0.0.1:{ports['gateway']}/v1/score",
            json={"items": [{**body["items"][0], "spec": "rloo_math"}]},
            timeout=30,
        )
        assert through.json()["results"][0]["reward"] == 1.0, through.text
        program = {
            "id": "c",
            "language": "python",
            "code": "print(int(input()) * 2)",
            "tests": {"kind": "stdio", "cases": [{"stdin": "21\n", "stdout": "42\n"}]},
        }
        ran = httpx.post(
            f"http://127.0.0.1:{ports['code']}/v1/code/score", json={"items": [program]}, timeout=60
        )
        assert ran.json()["results"][0]["reward"] == 1.0, ran.text
        judged = httpx.post(
            f"http://127.0.0.1:{ports['judge']}/v1/judge/score",
            json={
                "items": [
                    {
                        "id": "j",
                        "question": "q?",
                        "response": "r",
                        "rubrics": [{"text": "t", "polarity": "positive"}],
                    }
                ]
            },
            timeout=60,
        )
        [result] = judged.json()["results"]
        assert result["reward"] is None and result["error"]["code"] == "backend_unavailable"
    finally:
        for process in reversed(started):
            stop_process(process)
        for log in sorted(tmp_path.glob("*.log")):
            print(f"--- {log.name}\n{log.read_text()[-3000:]}")
