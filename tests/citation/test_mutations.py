"""The generated red-team: every honest answer of ``cases/redteam.jsonl``, mutated.

Meaning-changing mutations (``tests.citation.mutations.MEANING_CHANGING``: a number, a unit,
a name, a comparative, a quantifier, a scope, a polarity or a hedge swapped; a figure moved
to another of its own passage; a qualifier dropped; an uncited fact added in seven layouts
and languages) must be paid strictly less than the honest answer in the lexical mode;
meaning-preserving ones (reordering, a documented unit conversion, a pronoun subject) what
the lexical mode promises: the honest reward for the first two, at least partial (2/3 of it)
for the third. Seeded: the same mutations every run.
"""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.citation.mutations import MEANING_CHANGING, MEANING_PRESERVING, Mutation
from tribunal.citation.config import CitationConfig
from tribunal.citation.verifier import CitationVerifier
from tribunal.wire.citation import CitationItem

PARTIAL_SHARE = 2 / 3
_CASES = [
    json.loads(line)
    for line in (Path(__file__).parent / "cases" / "redteam.jsonl").read_text().splitlines()
    if line.strip()
]
HONEST = list(
    {
        json.dumps([c["honest"], c["evidence"], c["question"]]): (
            c["honest"],
            c["evidence"],
            c["question"],
        )
        for c in _CASES
    }.values()
)
"""The distinct honest answers of the data, with their evidence and question."""


pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def verifier() -> AsyncIterator[CitationVerifier]:
    verifier = CitationVerifier(CitationConfig(support="lexical"), processes=2)
    await verifier.start()
    yield verifier
    await verifier.aclose()


async def rewards(verifier: CitationVerifier, mutation: Mutation) -> list[tuple[str, float, float]]:
    """``(mutated response, its reward, the honest reward)`` for every honest answer the
    mutation applies to."""
    rng = random.Random(f"{mutation.__name__}")
    pairs: list[tuple[str, str, dict[str, Any], str]] = []
    for honest, evidence, question in HONEST:
        mutated = mutation(honest, evidence, rng)
        if mutated is not None:
            pairs.append((honest, mutated, evidence, question))
    items = [
        CitationItem(id=str(i), response=response, evidence=evidence, question=question)
        for i, (honest, mutated, evidence, question) in enumerate(pairs)
        for response in (honest, mutated)
    ]
    outcomes = await verifier.score(items)
    paid = [o.reward if o.reward is not None else 0.0 for o in outcomes]
    return [(pairs[i][1], paid[2 * i + 1], paid[2 * i]) for i in range(len(pairs))]


async def test_the_data_has_honest_answers_to_mutate() -> None:
    assert len(HONEST) >= 8


@pytest.mark.parametrize("mutation", MEANING_CHANGING, ids=lambda m: m.__name__)
async def test_a_meaning_changing_mutation_is_paid_less(
    verifier: CitationVerifier, mutation: Mutation
) -> None:
    results = await rewards(verifier, mutation)
    assert results, "the mutation applies to no honest answer"
    overpaid = [(r, m, h) for r, m, h in results if h > 0 and m >= h]
    assert not overpaid, overpaid[:3]


@pytest.mark.parametrize("mutation", MEANING_PRESERVING, ids=lambda m: m.__name__)
async def test_a_meaning_preserving_mutation_is_paid_what_lexical_mode_promises(
    verifier: CitationVerifier, mutation: Mutation
) -> None:
    results = await rewards(verifier, mutation)
    assert results, "the mutation applies to no honest answer"
    share = PARTIAL_SHARE if mutation.__name__ == "pronoun_subject" else 1.0
    underpaid = [(r, m, h) for r, m, h in results if m < share * h - 1e-9]
    assert not underpaid, underpaid[:3]
