"""compose.yaml is valid Compose and its commands work: as local processes, and in containers.

In ``make test`` each service's ``command`` (and its healthcheck) runs as a local process with
the compose environment, the host names mapped to 127.0.0.1 and ports moved to free ones.
``make compose-test`` runs the same stack in real containers: images built from the
Dockerfiles, podman-compose (see ``test_the_stack_runs_in_containers``). The ``gpu`` profile
(vLLM) cannot run on this machine and is skipped.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
import yaml

from bench.containers import Stack, running
from bench.containers import run as containers_run
from tests.conftest import FIXTURES, ROOT, free_port, start_process, stop_process, wait_ready
from tests.e2e.test_readme import curl_commands
from tribunal.testing.stack import stop_processes

pytestmark = pytest.mark.e2e

SCHEMA = FIXTURES / "compose-spec.json"
_VARIABLE = re.compile(r"\$\{(\w+)(?::?-([^}]*))?\}")


def compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())
    return document


def interpolate(value: str, env: dict[str, str] | None = None) -> str:
    """Compose's ``${VAR:-default}`` in ``env`` (by default an empty environment: the
    defaults)."""
    return _VARIABLE.sub(lambda m: (env or {}).get(m.group(1)) or m.group(2) or "", value)


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
    return [sys.executable, "-m", "tribunal.cli", *command[1:]]


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


def test_host_ports_and_gateway_urls_follow_the_environment() -> None:
    """One port setting moves a service under compose as under ``tribunal up``: its host
    port follows ``TRIBUNAL_<SERVICE>_PORT``; the gateway's verifier URLs can be set."""
    from tribunal.wire.ports import PORTS

    services = compose()["services"]
    moved = {name: str(port + 1000) for name, port in PORTS.items()}
    env = {f"TRIBUNAL_{name.upper()}_PORT": port for name, port in moved.items()}
    env["TRIBUNAL_GATEWAY_MATH_URL"] = "http://maths.example:9"
    for name, port in PORTS.items():
        [published] = services[name]["ports"]
        assert interpolate(published) == f"127.0.0.1:{port}:{port}"
        assert interpolate(published, env) == f"127.0.0.1:{moved[name]}:{port}"
    gateway = {k: interpolate(str(v), env) for k, v in services["gateway"]["environment"].items()}
    assert gateway["TRIBUNAL_GATEWAY_MATH_URL"] == "http://maths.example:9"
    assert gateway["TRIBUNAL_GATEWAY_CODE_URL"] == "http://code:8102"


def test_the_trainer_service_is_pointed_at_the_gateway() -> None:
    from tribunal.core.registry import load_service
    from tribunal.trainer.config import GRPOConfig

    services = compose()["services"]
    trainer = services["trainer"]
    assert trainer["profiles"] == ["train"] and "restart" not in trainer
    assert trainer["build"]["dockerfile"] == "docker/trainer.Dockerfile"
    mounts = {m.split(":")[1]: m.split(":")[0] for m in map(interpolate, trainer["volumes"])}
    assert set(mounts) == {"/config/train.yaml", "/data", "/runs"}
    config = GRPOConfig.from_yaml(ROOT / mounts["/config/train.yaml"])
    assert config.gateway_url == f"http://gateway:{load_service('gateway').port}"
    assert config.dataset.startswith("/data/") and config.reward_spec == "rloo_math"
    assert trainer["depends_on"]["gateway"]["condition"] == "service_healthy"
    # the image installs the trainer's lock, which holds the trainer extra
    dockerfile = (ROOT / "docker" / "trainer.Dockerfile").read_text()
    assert "COPY requirements/trainer.txt" in dockerfile and "--require-hashes" in dockerfile
    # torch apart, from PyTorch's index (requirements/torch.txt: no hash, the index picks the build)
    assert '--index-url "${TORCH_INDEX}" -r /opt/torch.txt' in dockerfile
    assert "deepspeed==" in (ROOT / "requirements" / "trainer.txt").read_text()


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
            # Profiles run other programs (vLLM, Prometheus, Grafana, the trainer):
            # test_monitoring.py runs Debian's Prometheus on the monitoring profile's files, and
            # test_training_stack.py the trainer against a stack.
            if name == "redis" or service.get("profiles"):
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
        checks = {}
        for name in ("math", "code", "judge", "citation", "gateway"):
            wait_ready(f"http://127.0.0.1:{ports[name]}", 60, {})
            check = [interpolate(part) for part in services[name]["healthcheck"]["test"][1:]]
            env = {**os.environ, f"TRIBUNAL_{name.upper()}_PORT": str(ports[name])}
            # Each check is a process of its own (its imports take a while): all at once.
            checks[name] = subprocess.Popen(
                tribunal_argv(check), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
        for name, check_process in checks.items():
            _, err = check_process.communicate(timeout=30)
            assert check_process.returncode == 0, (name, err)
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
        stop_processes(started[1:])  # the services at once, then their Redis
        stop_process(started[0])
        for log in sorted(tmp_path.glob("*.log")):
            print(f"--- {log.name}\n{log.read_text()[-3000:]}")


# The same stack in real containers: images built from the Dockerfiles, run by podman-compose.
# Minutes long and needs root and podman, so it runs under `make compose-test` (which installs
# what it needs and sets TRIBUNAL_COMPOSE_TEST=1), not in `make test`.
in_containers = pytest.mark.skipif(
    os.environ.get("TRIBUNAL_COMPOSE_TEST") != "1",
    reason="builds images and runs containers: `make compose-test`",
)


def check_readme_answer(command: str, answer: dict[str, Any]) -> str:
    """Check one README curl answer by what it asks; returns the kind of example it was."""
    if "error" in answer:
        # A request that is no batch (no items): refused, the field named.
        assert answer["error"]["code"] == "bad_input" and answer["error"]["field"], answer
        return "error"
    if re.search(r"/v1/jobs/\w", command):
        assert answer["status"] == "done" and answer["completed"] == answer["total"], answer
        assert all(result["reward"] == 1.0 for result in answer["results"]), answer
        return "job result"
    if "/v1/jobs" in command:
        assert answer["created"] is True, answer
        return "job"
    if "/v1/code/run" in command:
        assert answer["exit_code"] == 0 and answer["verdict"] == "accepted", answer
        return "code run"
    path = command.split("localhost:", 1)[1].split()[0].strip("'")
    if "rewards" in answer:  # OpenRLHF's remote reward protocol
        assert all(math.isfinite(reward) for reward in answer["rewards"]), answer
        return path
    if "results" not in answer:  # a listing (the gateway's specs): an answer, not an error
        assert answer, command
        return path
    kind = path
    for result in answer["results"]:
        if result["reward"] is None and result["error"]["code"] == "bad_input":
            # The documented item failure: a field missing, named by the item's error.
            assert result["error"]["field"], result
            kind = "error"
        elif result["reward"] is None:
            # No judge model runs without the gpu profile: the documented answer.
            assert result["error"]["code"] == "backend_unavailable", result
        elif "/v1/math/" in command or "/v1/code/" in command:
            assert result["reward"] == 1.0, result
        else:
            # Gateway specs may combine rewards by a formula, below 0 or above 1.
            assert math.isfinite(result["reward"]), result
    return kind


def host_oom_kills() -> list[str]:
    """The kernel log's last OOM kills (``dmesg``, where it may be read): a sandbox driver
    killed by SIGKILL with no output and a host OOM kill of its ``python3`` at the same time is
    the host's memory running out (the sandbox's processes are the OOM killer's first
    choice), not a fault of Tribunal."""
    try:
        log = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [f"the kernel log cannot be read here: {exc}"]
    return [line for line in log.stdout.splitlines() if "Killed process" in line][-5:]


def check_readme_examples(stack: Stack) -> None:
    """Every README curl example, sent as written to the containers' published ports."""
    job_id = None
    kinds = []
    for command in curl_commands():
        for container_port, host_port in stack.ports.items():
            command = command.replace(f"localhost:{container_port}/", f"localhost:{host_port}/")
        if "<id>" in command:
            assert job_id is not None, "the README polls a job before creating one"
            command = command.replace("<id>", job_id)
        run = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, (command, run.stderr)
        answer = json.loads(run.stdout)
        job_id = answer.get("job_id", job_id)
        try:
            kinds.append(check_readme_answer(command, answer))
        except AssertionError as exc:
            if "sandbox_error" not in run.stdout:
                raise
            # Not retried: a sandbox killed from outside is a finding, whoever killed it.
            raise AssertionError(f"{exc}\nthe kernel's last OOM kills: {host_oom_kills()}") from exc
    assert {"error", "job", "job result", "code run"} <= set(kinds), kinds
    assert len(kinds) >= 7, kinds


def check_healthchecks(stack: Stack) -> None:
    """Each service's compose healthcheck passes inside its container (podman 4.3 without
    systemd runs them only when asked)."""
    containers = stack.containers()
    for name, service in stack.document["services"].items():
        assert containers.get(name), f"no container for service {name}"
        if "healthcheck" in service:
            for container in containers[name]:
                containers_run(["podman", "healthcheck", "run", container])


def check_job_survives_a_killed_worker(stack: Stack) -> None:
    """SIGKILL the math worker's process mid-job, as a crash would: compose's restart policy
    starts the container again, the items it held are claimed again after the visibility
    timeout, and the job completes with every result."""
    items = [
        {"id": f"k{k}", "response": f"\\boxed{{\\frac{{{k}}}{{97}}}}", "ground_truth": f"{k}/97"}
        for k in range(1, 4001)
    ]
    [worker] = stack.containers()["math-worker"]
    with httpx.Client(base_url=stack.url(8101), timeout=60) as client:
        created = client.post("/v1/jobs", json={"verifier": "math", "items": items})
        job_url = f"/v1/jobs/{created.json()['job_id']}"
        deadline = time.monotonic() + 120
        while client.get(job_url).json()["completed"] == 0:
            assert time.monotonic() < deadline, "the worker never started on the job"
            time.sleep(0.05)
        restarts = inspect(worker, "{{.RestartCount}}")
        os.kill(int(inspect(worker, "{{.State.Pid}}")), signal.SIGKILL)
        killed = client.get(job_url).json()
        assert killed["status"] != "done" and killed["completed"] < len(items), killed
        deadline = time.monotonic() + 60
        while inspect(worker, "{{.RestartCount}}") == restarts:
            assert time.monotonic() < deadline, "the killed worker was not restarted"
            time.sleep(0.2)
        deadline = time.monotonic() + 240
        while (job := client.get(job_url, params={"wait": 10}).json())["status"] != "done":
            assert time.monotonic() < deadline, job
    assert job["completed"] == len(items), job
    assert [result["id"] for result in job["results"]] == [item["id"] for item in items]
    assert all(result["reward"] == 1.0 for result in job["results"]), job["results"][:3]


def inspect(container: str, template: str) -> str:
    """One field of ``podman inspect``."""
    return containers_run(["podman", "inspect", "--format", template, container]).strip()


@pytest.mark.slow
@in_containers
def test_the_stack_runs_in_containers(tmp_path: Path) -> None:
    stack = Stack(tmp_path)
    for service in stack.built_services().values():
        stack.build(service)
    try:
        with running(stack, ready_timeout_s=300):
            check_healthchecks(stack)
            check_readme_examples(stack)
            check_job_survives_a_killed_worker(stack)
    finally:
        leftovers = stack.leftovers()
    assert leftovers == {"ps": [], "network": [], "volume": []}, leftovers
