"""Faults while the trainer runs, on the whole stack: the trainer (tiny random Qwen3 on
DeepSpeed ZeRO-3, CPU) against the gateway with math, code, judge and citation behind it, one
Redis with an append-only file in the middle, and faults made between steps:

- ``kill_<services>_workers``: the workers of math and the gateway, of judge and citation, or
  of code SIGKILLed together and started again (their pending items are claimed back after the
  visibility timeout, new ones wait in the stream);
- ``restart_redis``: Redis shut down and started again on its append-only file;
- ``restart_gateway``: the gateway's API stopped and started again;
- ``judge_slow_then_down``: the judge's model server answers slowly, then not at all: under
  ``on_reward_failure: stop`` the run stops with the cause; under ``drop_group`` the groups
  leave the loss with the failure counted, and the run finishes.

The judge's model is the scripted OpenAI-compatible server (``FakeOpenAIServer``, standing in
for vLLM, which needs a GPU), so that it can be made slow and stopped; the citation scorer
runs its lexical mode. Everything else is real processes on real sockets.

Each scenario returns what the trainer's own metrics say: steps done, the share of completions
scored per step, groups dropped and retried, failures by class, and the message it stopped
with. The promise: no item lost (every completion scored, or its group dropped with a class
counted), errors classed, the failure policy applied, and the run finishes or stops naming the
cause. ``tests/faults/test_stack_faults.py`` runs the same scenarios, two steps each.

    python -m bench.stack_faults --steps 4        # one JSON object on stdout
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bench import results as bench_results
from bench.training_data import write_datasets
from tribunal.llm.testing import FakeOpenAIServer, FakeScript
from tribunal.testing.stack import (
    FullStack,
    RedisServer,
    free_port,
    start_full_stack,
    wait_ready,
)

logger = logging.getLogger("bench.stack_faults")
ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "trainer" / "tribunal" / "trainer" / "configs"
SPEC_CONFIGS = {
    "refiner_rubric_citation": "stack_refiner_cpu.yaml",
    "tcr_agent": "stack_tcr_cpu.yaml",
    "rloo_math": "stack_rloo_cpu.yaml",
}


@dataclass
class FaultStack:
    """The stack under test, its Redis and the judge's model server."""

    stack: FullStack
    redis: RedisServer
    judge: FakeOpenAIServer
    datasets: dict[str, Path]
    workdir: Path


@contextmanager
def fault_stack(workdir: Path) -> Iterator[FaultStack]:
    """Start Redis (append-only file), the judge's model server and the whole stack; stop
    everything on exit, whatever happened."""
    workdir.mkdir(parents=True, exist_ok=True)
    redis = RedisServer.on_free_port(aof_dir=workdir)
    redis.start()
    judge = FakeOpenAIServer(FakeScript(hash_levels=True))
    judge.start()
    env = {
        "TRIBUNAL_KEY_PREFIX": f"sf{free_port()}",
        "TRIBUNAL_MATH_PROCESSES": "1",
        "TRIBUNAL_CITATION_PROCESSES": "1",
        # a killed worker's items are claimed back after 4 s (default 60 s)
        "TRIBUNAL_VISIBILITY_TIMEOUT_S": "4",
    }
    judge_env = {
        "TRIBUNAL_JUDGE_BASE_URL": judge.base_url,
        "TRIBUNAL_JUDGE_MODEL": "fake-judge",
        # the judge's own retries of a down server, kept short (default 3, 60 s each)
        "TRIBUNAL_JUDGE_MAX_RETRIES": "1",
        "TRIBUNAL_JUDGE_TIMEOUT_S": "10",
    }
    try:
        stack = start_full_stack(
            redis.url, env=env, service_env={"judge": judge_env}, log_dir=workdir / "logs"
        )
    except BaseException:
        judge.stop()
        redis.stop(0)
        raise
    try:
        yield FaultStack(stack, redis, judge, write_datasets(workdir / "data", 16), workdir)
    finally:
        stack.stop()
        judge.stop()
        redis.stop()


def trainer_config(
    fs: FaultStack, spec: str, steps: int, policy: str, seed: int = 42
) -> dict[str, Any]:
    """The tutorial's CPU config of ``spec`` pointed at this stack, ``steps`` steps, with the
    failure policy ``policy``. Give each run a ``seed`` of its own: the same seed samples the
    same completions, which the verifiers' result caches would then answer without the parts
    a fault has broken."""
    raw = yaml.safe_load((CONFIGS / SPEC_CONFIGS[spec]).read_text())
    raw |= {
        "gateway_url": fs.stack.gateway_url,
        "dataset": str(fs.datasets[spec]),
        "max_steps": steps,
        "on_reward_failure": policy,
        "seed": seed,
    }
    if "tools" in raw:
        raw["tools"]["code_url"] = fs.stack.services["code"].base_url
    return raw


Fault = Callable[[], dict[str, Any]]


def run_trainer(raw: dict[str, Any], out: Path, faults: list[tuple[int, Fault]]) -> dict[str, Any]:
    """Train with ``raw`` into ``out``; once ``n`` steps are logged, make the fault paired
    with ``n`` (in a thread, while the trainer goes on). Returns the faults' own figures and
    the run's: ``steps``, ``scored_fraction`` and ``reward_wait_s`` per step (a fault the
    stack took time to get over shows as a longer wait), ``dropped``, ``retries``,
    ``failures`` and ``item_errors`` by class, and ``stopped`` (the message of a stopped
    run, as ``tribunal train`` prints it; None when it finished)."""
    from tribunal.trainer.config import GRPOConfig
    from tribunal.trainer.loop import Trainer
    from tribunal.trainer.rewards import RewardFailure

    metrics = out / "metrics.jsonl"
    made: list[dict[str, Any]] = []
    done = threading.Event()

    def watch() -> None:
        for after_steps, fault in faults:
            while not metrics.exists() or len(metrics.read_text().splitlines()) < after_steps:
                if done.wait(0.05):
                    return
            made.append({"after_step": after_steps, **fault()})

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    stopped = None
    try:
        # the trainer's console lines go to stderr: stdout is the benchmark's JSON
        with contextlib.redirect_stdout(sys.stderr):
            Trainer(GRPOConfig.from_dict(raw), out).run()
    except RewardFailure as exc:
        stopped = f"stopped: reward failure {exc}"  # the words `tribunal train` exits with
    finally:
        done.set()
        watcher.join(120)
    lines = metrics.read_text().splitlines() if metrics.exists() else []
    logged = [json.loads(line) for line in lines]
    failures: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    for step in logged:
        for key, value in step.items():
            if key.startswith("reward_failures/"):
                failures[key.removeprefix("reward_failures/")] += value
            elif key.startswith("reward_errors/"):
                errors[key.removeprefix("reward_errors/")] += value
    return {
        "faults": made,
        "steps": len(logged),
        "scored_fraction": [step["reward/scored_fraction"] for step in logged],
        "reward_wait_s": [round(step["time/reward_wait_s"], 2) for step in logged],
        "dropped": sum(step["groups/dropped"] for step in logged),
        "retries": sum(step["groups/retries"] for step in logged),
        "failures": dict(failures),
        "item_errors": dict(errors),
        "stopped": stopped,
    }


def kill_workers(fs: FaultStack, *services: str) -> Fault:
    """The fault: SIGKILL the worker of each service (its process group), start each again and
    wait until the service is ready."""

    def fault() -> dict[str, Any]:
        codes = {}
        for service in services:
            fs.stack.services[service].signal_group("worker0", signal.SIGKILL)
        for service in services:
            running = fs.stack.services[service]
            codes[f"{service}.worker0"] = running.wait_exit("worker0", 30)
            running.start_worker(0)
        for service in services:
            running = fs.stack.services[service]
            wait_ready(running.base_url, 120, running.processes)
        return {"killed": codes}

    return fault


def restart_redis(fs: FaultStack, down_s: float = 5.0) -> Callable[[], dict[str, Any]]:
    """The fault: Redis shut down (SIGTERM: its append-only file flushed), started again
    after ``down_s`` on the same port."""

    def fault() -> dict[str, Any]:
        fs.redis.stop(grace_s=20)
        time.sleep(down_s)
        fs.redis.start(ready_s=20)
        return {"redis_down_s": down_s}

    return fault


def restart_gateway(fs: FaultStack) -> Callable[[], dict[str, Any]]:
    """The fault: the gateway's API stopped (SIGTERM) and started again on its port."""

    def fault() -> dict[str, Any]:
        gateway = fs.stack.services["gateway"]
        gateway.signal_group("api", signal.SIGTERM)
        code = gateway.wait_exit("api", 30)
        gateway.start_api()
        wait_ready(gateway.base_url, 120, gateway.processes)
        return {"restarted": "gateway.api", "exit_code": code}

    return fault


def judge_slow(fs: FaultStack, slow_s: float = 1.0) -> Fault:
    """The fault: every call to the judge's model takes ``slow_s`` from now on."""

    def fault() -> dict[str, Any]:
        fs.judge.latency_s = slow_s
        return {"judge_latency_s": slow_s}

    return fault


def judge_down(fs: FaultStack) -> Fault:
    """The fault: the judge's model server is gone (its port refuses connections)."""

    def fault() -> dict[str, Any]:
        fs.judge.stop()
        return {"judge": "down"}

    return fault


KILLS: list[tuple[tuple[str, ...], str]] = [
    (("math", "gateway"), "rloo_math"),
    (("judge", "citation"), "refiner_rubric_citation"),
    (("code",), "tcr_agent"),
]
"""Workers killed together, and the spec whose run needs them (tcr_agent reaches the code
runner through its LeetCode rows' tests; a random policy makes no tool call)."""


def scenarios(fs: FaultStack, steps: int, out: Path) -> dict[str, dict[str, Any]]:
    """Every scenario on one stack, in an order that leaves it working for the next: the
    judge's model server, stopped in the last two, is not started again. A fault comes after
    the first step; the judge is slow after the first and down after the second, and the
    stopping run gets two steps more (the step after a fault may already be scored). Each run
    samples with a seed of its own."""
    plan: list[tuple[str, str, int, str, list[tuple[int, Fault]]]] = [
        (
            f"kill_{'_'.join(services)}_workers",
            spec,
            steps,
            "retry",
            [(1, kill_workers(fs, *services))],
        )
        for services, spec in KILLS
    ]
    plan += [
        ("restart_redis", "rloo_math", steps, "retry", [(1, restart_redis(fs))]),
        ("restart_gateway", "rloo_math", steps, "retry", [(1, restart_gateway(fs))]),
        (
            "judge_slow_then_down_stop",
            "refiner_rubric_citation",
            steps + 2,
            "stop",
            [(1, judge_slow(fs)), (2, judge_down(fs))],
        ),
        ("judge_down_drop_group", "refiner_rubric_citation", steps, "drop_group", []),
    ]
    results = {}
    for seed, (name, spec, n_steps, policy, faults) in enumerate(plan, start=1000):
        raw = trainer_config(fs, spec, n_steps, policy, seed)
        results[name] = {
            "spec": spec,
            "policy": policy,
            "planned_steps": n_steps,
            **run_trainer(raw, out / name, faults),
        }
        logger.info("%s: %s", name, json.dumps(results[name]))
    return results


def main() -> None:
    """Command line: run every scenario and print one JSON object."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4, help="Trainer steps per scenario.")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    logger.setLevel(logging.INFO)
    # kept: the processes' logs and the runs' metrics are the evidence when a scenario fails
    tmp = Path(tempfile.mkdtemp(prefix="stack-faults-"))
    started = time.monotonic()
    with fault_stack(tmp / "stack") as fs:
        results: dict[str, Any] = scenarios(fs, args.steps, tmp / "runs")
    results["wall_s"] = round(time.monotonic() - started, 1)
    results["workdir"] = str(tmp)
    print(json.dumps(results, indent=2))
    bench_results.record("stack_faults", results, tables(results))


FAULTS = {
    "restart_redis": "Redis down 5 s (SIGTERM, then started on its AOF)",
    "restart_gateway": "gateway API stopped and started",
    "judge_slow_then_down_stop": "judge's model 1 s a call after step 1, down after step 2",
    "judge_down_drop_group": "judge's model down",
}


def _label(name: str, run: dict[str, Any]) -> str:
    if name.startswith("kill_"):
        services = name.removeprefix("kill_").removesuffix("_workers").split("_")
        fault = f"{' and '.join(services)} workers SIGKILLed, started again"
    else:
        fault = FAULTS.get(name, name)
    return f"{fault} (`{run['spec']}`, `{run['policy']}`)"


def _classes(run: dict[str, Any]) -> str:
    failures = ", ".join(f"`{k}` {v:g}" for k, v in sorted(run["failures"].items()))
    errors = ", ".join(f"`{k}` {v:g}" for k, v in sorted(run["item_errors"].items()))
    if errors:
        failures += f" (items: {errors})"
    if run["stopped"]:
        failures = (failures + "; " if failures else "") + "stopped, the message below"
    return failures or "—"


def tables(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The docs' table: per scenario, steps done, the share scored and the reward wait per
    step (the longest in bold where a fault was made), groups dropped, retries, failures by
    class."""
    rows = []
    for name, run in report.items():
        if not isinstance(run, dict):
            continue
        waits = [f"{w:.2f}" for w in run["reward_wait_s"]]
        if run["faults"] and waits:
            longest = max(range(len(waits)), key=lambda i: run["reward_wait_s"][i])
            waits[longest] = f"**{waits[longest]}**"
        steps = (
            f"stopped in step {run['steps'] + 1}"
            if run["stopped"]
            else f"{run['steps']} / {run['planned_steps']}"
        )
        rows.append(
            [
                _label(name, run),
                steps,
                ", ".join(f"{f:g}" for f in run["scored_fraction"]),
                ", ".join(waits),
                f"{run['dropped']:g}",
                f"{run['retries']:g}",
                _classes(run),
            ]
        )
    return [
        bench_results.table(
            [
                "scenario (spec, policy)",
                "steps",
                "scored per step",
                "reward wait per step, s",
                "groups dropped",
                "retries",
                "failures by class",
            ],
            rows,
        )
    ]


if __name__ == "__main__":
    main()
