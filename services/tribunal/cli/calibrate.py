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


@app.command()
def judge(
    labels: Annotated[
        Path, typer.Argument(help="JSONL of rubric items with human verdicts (docs/judge.md).")
    ],
    limit: Annotated[
        int | None, typer.Option(min=1, help="Judge the first N responses only.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Judge every labelled response against its rubric items with the rubric judge and
    print its agreement with the human verdicts (precision and recall of met, Cohen's kappa,
    the confusion table, reward vs human share of met items per response). The judge uses
    the judge service's settings: TRIBUNAL_JUDGE_BASE_URL (any OpenAI-compatible server),
    TRIBUNAL_JUDGE_MODEL …"""
    from pydantic import ValidationError

    from tribunal.judge.calibrate import (
        JudgeVerdict,
        agreement,
        read_labels,
        report,
        verdicts_of,
    )
    from tribunal.judge.settings import JudgeSettings
    from tribunal.judge.verifier import JudgeVerifier
    from tribunal.wire.errors import TribunalError

    try:
        labelled = read_labels(labels, limit)
    except TribunalError as exc:
        raise typer.BadParameter(exc.message, param_hint="LABELS") from exc
    items = []
    for i, response in enumerate(labelled):
        try:
            items.append(response.item(str(i)))
        except ValidationError as exc:  # over the judge's limits (rubrics, characters)
            problem = exc.errors()[0]
            raise typer.BadParameter(
                f"response {response.key} cannot be judged: {problem['loc']} {problem['msg']}",
                param_hint="LABELS",
            ) from exc
    verifier = JudgeVerifier(JudgeSettings().judge.config())

    async def run() -> tuple[list[list[JudgeVerdict]], list[float]]:
        await verifier.start()
        try:
            outcomes = await verifier.score(items)
        finally:
            await verifier.aclose()
        failed = [o.error for o in outcomes if o.error is not None]
        if failed:
            raise typer.BadParameter(f"{len(failed)} responses could not be judged: {failed[0]}")
        verdicts: list[list[JudgeVerdict]] = []
        rewards: list[float] = []
        for outcome in outcomes:
            assert outcome.details is not None and outcome.reward is not None
            try:
                verdicts.append(verdicts_of(outcome.details))
            except ValueError as exc:
                raise typer.BadParameter(str(exc)) from exc
            rewards.append(outcome.reward)
        return verdicts, rewards

    verdicts, rewards = asyncio.run(run())
    result = agreement(labelled, verdicts, rewards)
    if as_json:
        typer.echo(json.dumps(result.as_dict()))
    else:
        typer.echo(report(result))
