"""Every benchmark under ``bench/``: its module, its one purpose, and the arguments of its
quick run (seconds, to show it still runs; never its figures).

``python -m bench list`` prints this table; ``python -m bench run NAME --quick`` runs an
entry with its ``quick`` arguments; ``tests/bench/test_runner.py`` runs every quick run the
test machine can (each entry is either quick, ``--help`` only with the reason in ``slow``, or
skipped with the reason in ``needs``).

The modules of ``bench/`` that are not here are helpers, not benchmarks: ``results`` and
``stats`` (what every benchmark shares), ``_stack``, ``noop``, ``raw_loop``,
``fault_scenarios`` (the scenarios ``faults`` and ``tests/faults/`` share), the data
loaders ``citation_data``, ``code_data``, ``training_data`` and ``reasoning_outputs``,
``protocol_passes`` (OpenRLHF's passes of ``protocols``, run in OpenRLHF's own venv), and
what tests share with the benchmarks: ``containers`` (compose's stack in podman) and
``math_mutations`` (the math red-team's operators). Tests import these; nothing here imports
``tests``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Benchmark:
    """One benchmark.

    Attributes:
        name: Its name, and its module ``bench.<name>``; its result is
            ``bench/results/<name>.json`` unless its own ``--record NAME`` says otherwise.
        purpose: The one question it answers (one line).
        quick: Arguments of a run of a few seconds that goes through every part of it.
        slow: Why it has no quick run (its ``--help`` is what a test runs); empty when it has.
        needs: What a quick run needs that a 2-core machine without a GPU or containers lacks
            (a test skips it, saying this); empty when it runs anywhere.
    """

    name: str
    purpose: str
    quick: tuple[str, ...] = ()
    slow: str = ""
    needs: str = ""

    @property
    def module(self) -> str:
        """The module ``python -m`` runs: ``bench.<name>``."""
        return f"bench.{self.name}"


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark(
        "audit_overhead",
        "The gateway's CPU per spec item with auditing at 0, 5 and 100 %, and the audit "
        "store's Redis memory per million items.",
        ("--items", "256", "--rounds", "1", "--fill", "2000"),
    ),
    Benchmark(
        "citation_throughput",
        "Citation scorer claims/s on the DR Tulu-style traces, and CPU per judged claim.",
        ("--rounds", "1"),
    ),
    Benchmark(
        "citation_extractive_skip",
        "Judge calls, keys and prompt text the citation judge mode's extractive gate saves "
        "on AttributionBench, and whether any verdict changes.",
        ("--limit", "10"),
    ),
    Benchmark(
        "client_overhead",
        "What tribunal.client and `tribunal score` cost against a raw HTTP loop.",
        ("--items", "64", "--rounds", "1", "--workers", "1"),
    ),
    Benchmark(
        "code_case_cost",
        "CPU per sandboxed run and per stdio case.",
        ("--runs", "3", "--cases", "2"),
    ),
    Benchmark(
        "code_throughput",
        "Code service runs/s and scoring over HTTP + Redis + workers against a bare subprocess.",
        (
            "--runs",
            "4",
            "--run-setups",
            "1x1",
            "--pace-ms",
            "0",
            "--leetcode-limit",
            "2",
            "--requests",
            "2",
            "--layers-runs",
            "0",
            "--beside-rounds",
            "0",
            "--humaneval-limit",
            "4",
            "--skip-compare",
        ),
    ),
    Benchmark(
        "compose",
        "compose.yaml's stack in containers: image builds, start-up, sizes, math throughput.",
        needs="podman and container images (builds them: minutes)",
    ),
    Benchmark(
        "faults",
        "Queue faults (worker killed or stopped, Redis restarted or down at start) at 2,000 "
        "items, and generated requests against every API: items lost/duplicated, 5xx.",
        slow="its scenarios wait out Redis restarts and a visibility timeout and its fuzz starts "
        "every service (a minute at the least); tests/faults/ runs the same scenarios "
        "(bench/fault_scenarios.py) at a few hundred items",
    ),
    Benchmark(
        "gateway_one_item",
        "One-item requests through the gateway's synchronous route against the math route.",
        ("--concurrency", "2", "--seconds", "1"),
    ),
    Benchmark(
        "gateway_overhead",
        "What the gateway costs: the same batches straight to the verifiers and through it.",
        ("--rounds", "1", "--math-items", "64", "--refiner-items", "16", "--latency-ms", "5"),
    ),
    Benchmark(
        "hf_logprobs",
        "Old log-probabilities of HF generate rollouts: kept logits against one forward pass.",
        (
            "--layers",
            "1",
            "--vocab",
            "256",
            "--n",
            "2",
            "--tokens",
            "4",
            "--rounds",
            "1",
        ),
    ),
    Benchmark(
        "inspect_overhead",
        "Math scoring throughput with the reward inspector's record on and off.",
        ("--items", "64", "--rounds", "1", "--workers", "1"),
    ),
    Benchmark(
        "judge_redteam",
        "What the red-team cases earn from the judges' prompt building and verdict reading.",
    ),
    Benchmark(
        "judge_throughput",
        "Rubric verdicts/s of the judge service over HTTP against a fake judge.",
        ("--quick", "--verdicts", "64", "--k", "4", "--latency-ms", "5"),
    ),
    Benchmark(
        "judge_verifier_throughput",
        "Rubric verdicts/s of JudgeVerifier in-process against the fake judge (no queue).",
        ("--verdicts", "64", "--k", "4", "--latency-ms", "5", "--workers", "0"),
    ),
    Benchmark(
        "load",
        "Many concurrent clients (locust users) on the gateway and the four verifiers.",
        ("--users", "4", "--duration", "2", "--warmup", "1"),
    ),
    Benchmark(
        "math_fidelity",
        "Math reward agreement with labelled cases, ours beside Math-Verify's defaults.",
        slow="scores every labelled case set (minutes); it has no smaller run",
    ),
    Benchmark(
        "math_throughput",
        "Math verifier items/s: Math-Verify in-process, the service, and the queue alone.",
        slow="passes over GSM8K and MATH-500 whole (minutes); --rounds 1 is its smallest run",
    ),
    Benchmark(
        "protocols",
        "Each trainer protocol through the trainer's own client against tribunal.client.",
        (
            "--items",
            "8",
            "--runs",
            "2",
            "--rounds",
            "1",
            "--openrlhf-concurrency",
            "2",
            "--trl-batch",
            "4",
        ),
    ),
    Benchmark(
        "redis_ceiling",
        "Where one Redis stops: its CPU time per queued item and the rate that bounds.",
        ("--job-size", "50", "--workers", "1", "--runs", "1"),
    ),
    Benchmark(
        "scaling",
        "CPU per item by process kind, through the services against the same work without.",
        ("--math-items", "16", "--code-runs", "8", "--slots", "1", "--processes", "1"),
    ),
    Benchmark(
        "sessions",
        "Code-interpreter sessions: start latency, per-call overhead, memory, an episode.",
        ("--starts", "2", "--calls", "3", "--held", "2", "--episodes", "1"),
    ),
    Benchmark(
        "soak",
        "Boundedness, not faults: Redis, every process's memory and the logs stay flat over "
        "a long run at the sustained rate on a small maxmemory.",
        ("--seconds", "3", "--warmup-s", "1", "--clients", "2", "--batch", "4"),
    ),
    Benchmark(
        "stack_faults",
        "Faults while the trainer runs (a verifier, the gateway or Redis killed mid-step): "
        "does training finish with the same rewards?",
        slow="trains a tiny model on DeepSpeed ZeRO-3 through every scenario (minutes); "
        "tests/faults/test_stack_faults.py runs the same scenarios",
    ),
    Benchmark(
        "trainer_gpu",
        "The trainer on a GPU: DeepSpeed ZeRO-3 over NCCL in bf16, a 0.5B random Qwen3.",
        needs="a CUDA GPU",
    ),
    Benchmark(
        "trainer_overlap",
        "Where a training step's time goes: generation, waiting for rewards, training.",
        slow="trains three tiny models in subprocesses, one per part (minutes)",
    ),
    Benchmark(
        "worker_handover",
        "How many verification processes one worker process keeps busy.",
        ("--processes", "2", "--items", "200"),
    ),
)

BY_NAME: dict[str, Benchmark] = {b.name: b for b in BENCHMARKS}
"""The entries by name."""
