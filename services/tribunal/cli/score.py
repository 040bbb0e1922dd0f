"""``tribunal score``: a JSONL file through a service, with a progress bar and a summary.

The scoring and the resume rules are ``tribunal.client.score_file``'s; this module reads
and writes the files, draws the progress bar (rich, on standard error) and prints the
closing summary (items, mean reward, errors by class, items/s).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path
from typing import IO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from tribunal.client import ClientError, TribunalClient
from tribunal.client.score_file import (
    ScoreSummary,
    input_digest,
    kept_results,
    read_items,
    score_items,
)


def run_score(
    verifier: str,
    input_path: str,
    output: str,
    *,
    url: str,
    api_key: str | None,
    chunk_size: int,
    concurrency: int,
    restart: bool,
) -> int:
    """Score ``input_path`` (``-``: stdin) into ``output`` (``-``: stdout); return the exit
    code (0 done, items the service refused included; 1 a client error; 2 bad input: the
    input cannot be read, holds no item or a line that is not JSON, or the output is not
    this input's; 130 interrupted)."""
    console = Console(stderr=True, soft_wrap=True, highlight=False)
    try:
        data = sys.stdin.buffer.read() if input_path == "-" else Path(input_path).read_bytes()
    except OSError as exc:
        console.print(f"{input_path}: {exc.strerror or exc}", style="red", markup=False)
        return 2
    try:
        items = read_items(data)
    except ValueError as exc:
        console.print(f"{input_path}: {exc}", style="red", markup=False)
        return 2
    summary = ScoreSummary(items=len(items))
    start = 0
    if output != "-":
        path = Path(output)
        if restart and path.exists():
            path.unlink()
        try:
            start = summary.kept = kept_results(path, items, summary)
        except ValueError as exc:
            console.print(str(exc), style="red", markup=False)
            return 2
    if start:
        console.print(
            f"{output}: {start} results kept from an earlier run; scoring the rest", markup=False
        )
    with contextlib.ExitStack() as stack:
        out: IO[bytes] = (
            sys.stdout.buffer if output == "-" else stack.enter_context(open(output, "ab"))
        )
        progress = stack.enter_context(_progress(console))
        task = progress.add_task(verifier, total=len(items), completed=start)

        async def main() -> None:
            async with TribunalClient(url, api_key=api_key, max_concurrency=concurrency) as c:
                await score_items(
                    c,
                    verifier,
                    items,
                    out,
                    digest=input_digest(data),
                    start=start,
                    chunk_size=chunk_size,
                    concurrency=concurrency,
                    summary=summary,
                    on_progress=lambda n: progress.advance(task, n),
                )

        try:
            asyncio.run(main())
        except KeyboardInterrupt:
            _print_summary(console, summary)
            console.print(
                f"interrupted: run the same command again to resume ({output})", markup=False
            )
            return 130
        except ClientError as exc:
            _print_summary(console, summary)
            console.print(f"{type(exc).__name__}: {exc}", style="red", markup=False)
            return 1
    _print_summary(console, summary)
    return 0


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    )


def _print_summary(console: Console, summary: ScoreSummary) -> None:
    mean = "n/a" if summary.mean_reward is None else f"{summary.mean_reward:.4f}"
    errors = ", ".join(f"{code} {n}" for code, n in summary.errors.most_common()) or "none"
    console.print(
        f"items {summary.items} (kept {summary.kept}, scored {summary.scored})  "
        f"mean reward {mean}  errors: {errors}  "
        f"{summary.items_per_s:.1f} items/s"
    )
