"""``tribunal calibrate``: measure a reward against human labels."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(help="Measure a reward against human labels.", no_args_is_help=True)


@app.command()
def citation(
    labels: Annotated[Path, typer.Argument(help="JSONL of labelled claims (docs/citation.md).")],
    support: Annotated[
        str, typer.Option(help="Support mode to calibrate: lexical, judge or nli.")
    ] = "lexical",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Score every labelled claim through a support mode and print its agreement with the
    human labels (precision and recall of supported, Cohen's kappa, the confusion table,
    reward vs human share per answer, the disagreement classes). The judge and nli modes use
    the citation service's settings (TRIBUNAL_CITATION_BASE_URL …, TRIBUNAL_CITATION_NLI_MODEL)."""
    # Imported here: the other commands need no verifier (a CLI start stays fast).
    from tribunal.citation.api import create_verifiers
    from tribunal.citation.calibrate import Verdict, agreement, read_labels, report, verdict_of
    from tribunal.citation.settings import CitationSettings
    from tribunal.wire.errors import TribunalError

    if support not in ("lexical", "judge", "nli"):
        raise typer.BadParameter("lexical, judge or nli", param_hint="--support")
    try:
        labelled = read_labels(labels)
    except TribunalError as exc:
        raise typer.BadParameter(exc.message, param_hint="LABELS") from exc
    [verifier] = create_verifiers(CitationSettings())

    async def run() -> list[Verdict]:
        await verifier.start()
        try:
            items = [claim.item(str(i), support) for i, claim in enumerate(labelled)]
            outcomes = await verifier.score(items)
        finally:
            await verifier.aclose()
        failed = [o.error for o in outcomes if o.error is not None]
        if failed:
            raise typer.BadParameter(f"{len(failed)} claims could not be scored: {failed[0]}")
        return [verdict_of(o.details) for o in outcomes]

    result = agreement(labelled, asyncio.run(run()))
    if as_json:
        typer.echo(json.dumps({"support": support, **result.as_dict()}))
    else:
        typer.echo(report(result, support))
