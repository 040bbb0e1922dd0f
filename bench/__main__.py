"""The benchmark runner: ``python -m bench list`` and ``python -m bench run NAME``.

``run`` starts ``python -m bench.NAME`` as a child process with the entry's quick arguments
(``--quick``) and the extra arguments after ``--``, and exits with the child's status. The
result goes where the docs read it (``bench/results/NAME.json``) only with ``--record``
(which sets ``TRIBUNAL_BENCH_RECORD=1`` for the child); otherwise into a temporary folder
(see :func:`bench.results.record`).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from bench.registry import BENCHMARKS, BY_NAME, Benchmark

ROOT = Path(__file__).resolve().parents[1]


def describe(benchmark: Benchmark) -> str:
    """One line of ``list``: name, purpose, and why a quick run is missing where it is."""
    line = f"{benchmark.name:<27} {benchmark.purpose}"
    if benchmark.slow:
        line += f" [no quick run: {benchmark.slow}]"
    if benchmark.needs:
        line += f" [needs {benchmark.needs}]"
    return line


def command(benchmark: Benchmark, quick: bool, extra: Sequence[str]) -> list[str]:
    """The child's command line.

    Raises:
        ValueError: ``quick`` for an entry that has no quick run (it says why).
    """
    if quick and benchmark.slow:
        raise ValueError(f"{benchmark.name} has no quick run: {benchmark.slow}")
    return [sys.executable, "-m", benchmark.module, *(benchmark.quick if quick else ()), *extra]


def environment(record: bool) -> dict[str, str]:
    """The child's environment: this one's, with ``TRIBUNAL_BENCH_RECORD=1`` when the result
    is to be recorded where the docs read it (``--record``); without it, an exported
    ``TRIBUNAL_BENCH_RECORD`` stands, as it does for ``python -m bench.NAME``."""
    return {**os.environ, **({"TRIBUNAL_BENCH_RECORD": "1"} if record else {})}


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """The runner's arguments; what follows ``--`` goes to the benchmark unread."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="action", required=True)
    commands.add_parser("list", help="Each benchmark with its purpose.")
    run = commands.add_parser("run", help="Run one benchmark.")
    run.add_argument("name", choices=sorted(BY_NAME), metavar="NAME", help="From `list`.")
    run.add_argument("--quick", action="store_true", help="Its quick run (seconds).")
    run.add_argument(
        "--record",
        action="store_true",
        help="Write bench/results/NAME.json, which the docs show (otherwise a temporary folder).",
    )
    argv = list(argv)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    args = parser.parse_args(argv[: len(argv) - len(extra) - (1 if "--" in argv else 0)])
    args.extra = extra
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (the benchmark's, for ``run``)."""
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.action == "list":
        for benchmark in BENCHMARKS:
            print(describe(benchmark))
        return 0
    benchmark = BY_NAME[args.name]
    try:
        child = command(benchmark, args.quick, args.extra)
    except ValueError as error:
        print(f"python -m bench: {error}", file=sys.stderr)
        return 2
    return subprocess.run(child, cwd=ROOT, env=environment(args.record), check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
