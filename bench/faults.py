"""Fault benchmark: does every accepted item get exactly one right result under faults, and
does any generated request get a 5xx? Prints one JSON object.

    .venv/bin/python bench/faults.py                 # 2,000-item jobs, 100 examples per case
    .venv/bin/python bench/faults.py --items 300 --examples 10   # quicker

Scenarios (``bench/fault_scenarios.py``; math API + 2 worker processes on a Redis with
append-only persistence, fsync on every write, visibility timeout 4 s), each on a job of
``--items`` items whose rewards are known:

(a) SIGKILL of a worker's process group mid-job; (b) SIGTERM of a worker's process group
mid-job (it finishes or releases its items and exits); (c) Redis shut down mid-job and started
again 2 s later; (d) Redis down when the API and worker start, back 3 s later, and the job
read again through a restarted API. For each: items lost / duplicated / wrong, permanent and
retryable errors (target: all 0).

Then schemathesis (property-based requests generated from the OpenAPI documents, valid and
invalid ones) against every service's API with its worker (math, code, judge, citation and
the gateway, pointed at the others), ``--examples`` per operation and mode: the count of
responses with status >= 500, and of statuses an operation answered that its document does
not list. The judge's and citation's model is the fake OpenAI-compatible server of
``tribunal.llm.testing`` (vLLM needs a GPU).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hypothesis
import requests
import schemathesis
from hypothesis import HealthCheck, Phase

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import results
from bench.fault_scenarios import Stack, kill_worker, redis_late, restart_redis, status, wait_until
from tribunal.core.registry import available_services
from tribunal.llm.testing import FakeOpenAIServer, FakeScript


def scenarios(items: int, root: Path) -> dict[str, Any]:
    """Run (a)-(d) on ``items``-item jobs; each figure dict has a ``seconds`` entry."""
    out: dict[str, Any] = {}
    runs = {
        "a_sigkill_worker": lambda s: kill_worker(s, items, signal.SIGKILL),
        "b_sigterm_worker_group": lambda s: kill_worker(s, items, signal.SIGTERM),
        "c_redis_restart_aof": lambda s: restart_redis(s, items),
        "d_redis_down_at_api_start": lambda s: redis_late(s, items),
    }
    for name, run in runs.items():
        stack = Stack(root / name)
        started = time.monotonic()
        try:
            figures = run(stack)
        finally:
            stack.close()
        out[name] = {**figures, "seconds": round(time.monotonic() - started, 1)}
    return out


@contextlib.contextmanager
def services(root: Path) -> Iterator[dict[str, str]]:
    """Every installed service's API with one worker, each on a Redis of its own; the gateway
    last, pointed at the others. Yields name -> URL."""
    model = FakeOpenAIServer(FakeScript())
    model.start()
    stacks: dict[str, Stack] = {}
    names = available_services()
    verifiers = [name for name in names if name != "gateway"]
    try:
        for name in [*verifiers, *(["gateway"] if "gateway" in names else [])]:
            env = {
                "TRIBUNAL_JUDGE_BASE_URL": model.base_url,
                "TRIBUNAL_JUDGE_MODEL": "fake-judge",
                "TRIBUNAL_CITATION_BASE_URL": model.base_url,
                "TRIBUNAL_CITATION_MODEL": "fake-judge",
                "TRIBUNAL_SYNC_TIMEOUT_S": "60",
            }
            if name == "gateway":
                env |= {
                    f"TRIBUNAL_GATEWAY_{other.upper()}_URL": stacks[other].base_url
                    for other in verifiers
                }
            stack = Stack(root / f"api-{name}", service=name, env=env)
            stacks[name] = stack
            stack.start_redis()
            stack.start_api()
            stack.start_worker(0)
            with stack.http() as client:
                wait_until(lambda c=client: status(c, "/readyz") == 200, 120, f"{name} ready")
        yield {name: stack.base_url for name, stack in stacks.items()}
    finally:
        for stack in stacks.values():
            stack.close()
        model.stop()


def fuzz(base_url: str, examples: int) -> dict[str, Any]:
    """Send ``examples`` generated requests per operation and mode; count 5xx and statuses
    not in the document."""
    document = requests.get(f"{base_url}/openapi.json", timeout=10).json()
    schema = schemathesis.openapi.from_dict(document)
    counts: dict[str, Any] = {
        "requests": 0,
        "5xx": 0,
        "undocumented": 0,
        "not_generated": 0,
        "examples": [],
    }
    session = requests.Session()
    for result in schema.get_all_operations():
        operation = result.ok()
        responses = document["paths"][operation.path][operation.method.lower()]["responses"]
        for mode in (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE):
            _send_examples(base_url, operation, mode, set(responses), examples, session, counts)
    return counts


def _send_examples(
    base_url: str,
    operation: Any,
    mode: Any,
    documented: set[str],
    examples: int,
    session: requests.Session,
    counts: dict[str, Any],
) -> None:
    def note(line: str) -> None:
        if len(counts["examples"]) < 5:
            counts["examples"].append(line)

    @hypothesis.given(case=operation.as_strategy(generation_mode=mode))
    @hypothesis.settings(
        max_examples=examples,
        phases=[Phase.generate],
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    def send(case: Any) -> None:
        response = case.call(base_url=base_url, session=session, timeout=90)
        counts["requests"] += 1
        code = response.status_code
        if code >= 500:
            counts["5xx"] += 1
            note(f"{operation.label} {code} {response.text[:200]}")
        elif str(code) not in documented and code != 405:  # 405: a method the path lacks
            counts["undocumented"] += 1
            note(f"{operation.label} undocumented {code} {response.text[:200]}")

    # Hypothesis reports to stdout; this program's stdout is its one JSON object.
    with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):
        warnings.simplefilter("ignore")
        try:
            send()
        except hypothesis.errors.Unsatisfiable:
            pass  # no invalid request exists (an operation without parameters or body)
        except Exception as exc:  # a generation failure, not an answer of the service
            counts["not_generated"] += 1
            note(f"{operation.label} {mode.value}: {type(exc).__name__}: {str(exc)[:200]}")


def main() -> None:
    """Parse arguments, run the scenarios and the fuzzing, print one JSON object."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=2000, help="Items per scenario job.")
    parser.add_argument("--examples", type=int, default=100, help="Examples per operation/mode.")
    parser.add_argument("--skip-fuzz", action="store_true", help="Scenarios only.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tribunal-faults-") as tmp:
        root = Path(tmp)
        out: dict[str, Any] = {"items": args.items, "scenarios": scenarios(args.items, root)}
        if not args.skip_fuzz:
            started = time.monotonic()
            with services(root) as urls:
                out["schemathesis"] = {name: fuzz(url, args.examples) for name, url in urls.items()}
            out["schemathesis_seconds"] = round(time.monotonic() - started, 1)
            out["schemathesis_5xx"] = sum(f["5xx"] for f in out["schemathesis"].values())
    print(json.dumps(out))
    results.record("faults", out, tables(out))


SCENARIOS = {
    "a_sigkill_worker": "(a) SIGKILL of a worker's process group mid-job",
    "b_sigterm_worker_group": "(b) SIGTERM of a worker's process group mid-job (exit 0)",
    "c_redis_restart_aof": "(c) Redis shut down mid-job, started again 2 s later (AOF)",
    "d_redis_down_at_api_start": "(d) Redis down when API and worker start, back 3 s later "
    "(`/readyz` 503 meanwhile)",
}
COUNTS = ("lost", "duplicated", "wrong", "permanent_errors", "retryable_errors")


def tables(out: dict[str, Any]) -> list[dict[str, Any]]:
    """The docs' tables: per scenario, what went wrong (target: all 0) and how long it took;
    per service, schemathesis's requests, 5xx and undocumented statuses."""
    scenario_rows = [
        [SCENARIOS.get(name, name), *(figures[key] for key in COUNTS), figures["seconds"]]
        for name, figures in out["scenarios"].items()
    ]
    tables_ = [
        results.table(
            [
                "scenario",
                "lost",
                "duplicated",
                "wrong",
                "permanent errors",
                "retryable errors",
                "seconds",
            ],
            scenario_rows,
            title=f"Jobs of {out['items']:,} items",
        )
    ]
    if "schemathesis" in out:
        fuzzed = out["schemathesis"]
        rows = [
            [name, f"{f['requests']:,}", f["5xx"], f["undocumented"], f["not_generated"]]
            for name, f in fuzzed.items()
        ]
        rows.append(
            [
                "all",
                f"{sum(f['requests'] for f in fuzzed.values()):,}",
                out["schemathesis_5xx"],
                sum(f["undocumented"] for f in fuzzed.values()),
                sum(f["not_generated"] for f in fuzzed.values()),
            ]
        )
        tables_.append(
            results.table(
                [
                    "service",
                    "generated requests",
                    "answered 5xx",
                    "status not in the document",
                    "not generated",
                ],
                rows,
                title=f"schemathesis, valid and invalid requests "
                f"({out['schemathesis_seconds']:.0f} s)",
            )
        )
    return tables_


if __name__ == "__main__":
    main()
