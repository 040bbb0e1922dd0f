"""CPU per sandboxed run and per stdio case of whichever ``tribunal`` is first on the path.

For before/after figures across commits, which in-process toggles cannot give (the per-case
clean-up and the driver's checks have none): export each tree and alternate them, e.g.

    git archive 495eb32 services | tar -x -C /tmp/before && ln -s services /tmp/before/tribunal
    git archive HEAD services | tar -x -C /tmp/after && ln -s services /tmp/after/tribunal
    for i in 1 2 3; do for tree in before after; do
        PYTHONPATH=/tmp/$tree .venv/bin/python bench/code_case_cost.py --runs 200 --cases 20
    done; done

Each call prints one JSON line: ``runs`` sandboxed ``print(1)`` runs one after another, then
``runs // 10`` stdio items of ``cases`` cases, with the wall time and the CPU of this process
and every sandbox (reaped children, from ``getrusage``; the verifiers are closed first, so
every sandbox is counted).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tribunal
from bench import stats
from tribunal.code import CodeConfig, CodeItem, CodeRunVerifier, CodeVerifier, RunItem


async def block(runs: int, cases: int) -> dict[str, object]:
    """One block of runs, then of stdio items (one slot, the configuration's defaults)."""
    config = CodeConfig(slots=1)
    out: dict[str, object] = {"tribunal": tribunal.__file__, "runs": runs}
    runner = CodeRunVerifier(config)
    await runner.start()
    cpu, start = stats.cpu_s(), time.perf_counter()
    for k in range(runs):
        [outcome] = await runner.score([RunItem(id=str(k), language="python", code="print(1)")])
        assert outcome.error is None, outcome
    out["run_wall_s"] = time.perf_counter() - start
    await runner.aclose()
    out["run_cpu_s"] = stats.cpu_s() - cpu
    scorer = CodeVerifier(config)
    await scorer.start()
    tests = {"kind": "stdio", "cases": [{"stdin": f"{k} 1\n", "stdout": str(k + 1)}
                                        for k in range(cases)]}  # fmt: skip
    program = "a, b = map(int, input().split())\nprint(a + b)"
    items = max(1, runs // 10)
    cpu, start = stats.cpu_s(), time.perf_counter()
    for k in range(items):
        item = CodeItem(id=str(k), language="python", code=program, tests=tests)
        [outcome] = await scorer.score([item])
        assert outcome.reward == 1.0, outcome
    out["case_wall_s"] = time.perf_counter() - start
    await scorer.aclose()
    out["case_cpu_s"] = stats.cpu_s() - cpu
    out["cases"] = items * cases
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=200, help="Sandboxed print(1) runs.")
    parser.add_argument("--cases", type=int, default=20, help="Cases per stdio item.")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(block(args.runs, args.cases))))


if __name__ == "__main__":
    main()
