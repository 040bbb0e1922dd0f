"""Where a benchmark's figures go: ``bench/results/<name>.json``, rendered by the docs.

A run writes there only when asked (``python -m bench run NAME --record``); a plain run
writes into a temporary folder and says where. Each file holds the command that produced
it, the date, the machine, the full report the benchmark prints, and its tables
(``columns`` and ``rows`` of display strings). The docs hook (``docs/hooks.py``) puts those
tables, each with its command, date and machine, where a page says
``<!-- tribunal:bench <name> -->``: the figures in the docs are the last run's, never
retyped.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
"""Where the docs read results; a run writes there only when asked (see :func:`folder`)."""


def folder(asked: bool = False) -> Path:
    """Where :func:`record` writes: ``TRIBUNAL_BENCH_RESULTS`` if set (a test's folder);
    else :data:`RESULTS` when recording is ``asked`` (a benchmark's own ``--record NAME``)
    or ``TRIBUNAL_BENCH_RECORD=1`` (``python -m bench run NAME --record``); else a new
    temporary folder, so a plain run never rewrites the committed figures.

    Raises:
        ValueError: ``TRIBUNAL_BENCH_RECORD`` is set to other than ``0`` or ``1``.
    """
    named = os.environ.get("TRIBUNAL_BENCH_RESULTS")
    if named:
        return Path(named)
    flag = os.environ.get("TRIBUNAL_BENCH_RECORD", "0")
    if flag not in ("0", "1"):
        raise ValueError(f"TRIBUNAL_BENCH_RECORD must be 0 or 1, not {flag!r}")
    if asked or flag == "1":
        return RESULTS
    return Path(tempfile.mkdtemp(prefix="tribunal-bench-"))


def add_record_argument(parser: argparse.ArgumentParser) -> None:
    """``--record NAME`` on a benchmark that records partial or other runs under their own
    names (``scaling_16core_code``): given, :func:`record` is asked to write
    ``bench/results/NAME.json``; absent, the result goes under the benchmark's name into a
    temporary folder. ``args.record`` is the name or ``None``."""
    parser.add_argument(
        "--record",
        metavar="NAME",
        help="Record as bench/results/NAME.json, which the docs show "
        "(without it: a temporary folder).",
    )


def table(
    columns: Sequence[str], rows: Sequence[Sequence[object]], title: str = ""
) -> dict[str, Any]:
    """One table of a result: ``rows`` of cells (written with ``str``) under ``columns``.

    Raises:
        ValueError: A row has not as many cells as there are columns.
    """
    for row in rows:
        if len(row) != len(columns):
            raise ValueError(f"row {list(row)} has {len(row)} cells for {len(columns)} columns")
    return {
        "title": title,
        "columns": list(columns),
        "rows": [["" if cell is None else str(cell) for cell in row] for row in rows],
    }


def span(values: Sequence[float], spec: str = ",.0f", suffix: str = "") -> str:
    """The range of ``values`` as a cell, ``"low–high"`` each written with the format
    ``spec`` (``",.1f"``), then ``suffix`` (``" %"``); one value where low and high read
    the same. Several runs of a benchmark are shown this way.

    Raises:
        ValueError: ``values`` is empty.
    """
    if not values:
        raise ValueError("no values")
    low, high = (format(v, spec) for v in (min(values), max(values)))
    return (low if low == high else f"{low}–{high}") + suffix


def machine() -> dict[str, Any]:
    """The machine a benchmark ran on: CPU model and cores (usable by this process), OS,
    Python, and the load average when the result is written."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": model,
        "cores": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "system": platform.platform(terse=True),
        "python": platform.python_version(),
        # Other work shares the cores: the figures move with it.
        "load_avg_1m": round(os.getloadavg()[0], 1) if hasattr(os, "getloadavg") else None,
    }


def command(argv: Sequence[str] | None = None) -> str:
    """The command line that ran this benchmark, as typed from the repository root
    (``python -m NAME ...`` for a module run with ``-m``)."""
    argv = sys.argv if argv is None else argv
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name.startswith("bench."):
        return shlex.join(["python", "-m", spec.name, *argv[1:]])
    script = Path(argv[0]).resolve()
    try:
        shown = script.relative_to(RESULTS.parents[1]).as_posix()
    except ValueError:
        shown = argv[0]
    return shlex.join(["python", shown, *argv[1:]])


def record(
    name: str,
    report: Mapping[str, Any],
    tables: Sequence[Mapping[str, Any]],
    note: str = "",
    asked: bool = False,
) -> Path:
    """Write ``<name>.json`` into :func:`folder` (``bench/results/`` only when recording is
    ``asked`` or ``TRIBUNAL_BENCH_RECORD=1``): this run's command, date (UTC), machine,
    ``report`` and ``tables`` (from :func:`table`); ``note`` says what differs from a full
    run (a short run, another load). Returns the path written.

    Raises:
        ValueError: ``TRIBUNAL_BENCH_RECORD`` is set to other than ``0`` or ``1``.
    """
    where = folder(asked)
    where.mkdir(parents=True, exist_ok=True)
    path = where / f"{name}.json"
    result = {
        "benchmark": name,
        "command": command(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "note": note,
        "tables": list(tables),
        "report": report,
    }
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {path}", file=sys.stderr)
    return path
