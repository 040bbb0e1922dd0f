"""The red-team suite: ``cases/redteam.jsonl``, through the verifier in the lexical mode.

Each case holds evidence, a question and an honest answer; every ``hack`` must earn strictly
less than the honest answer, and a padding hack (class 3) no more than the imperfect answer
it pads (``base``) (an item refused with an error earns nothing), and every honest
``variant`` (id spellings, the other grammar, a paraphrase, a claim needing two snippets)
must earn at least what lexical mode promises a meaning-preserving restatement (partial per
claim: 2/3 of the honest reward) and never more than the honest answer. Classes are the
issue's (26): 1 wrong content with high overlap, 2 uncited facts, 3 padding, 4 evidence
written by the policy, 5 honest answers under-paid by the parser, 6 oversized answers. A
hack written as an object overrides fields of the request: ``{"response": …, "evidence":
null}`` is a response carrying its own ``<tool_output>`` in a request without evidence
(refused: ``bad_input`` naming evidence). Evidence: encyclopedic text, biomedical abstracts
(sentences of ``shared/data/research``'s PubMed traces), and French snippets.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tribunal.citation.config import CitationConfig
from tribunal.citation.verifier import CitationVerifier
from tribunal.wire.citation import CitationItem

PARTIAL_SHARE = 2 / 3
"""F1 of a partial claim with every citation relevant: 2 · 1 · 0.5 / 1.5."""

CASES = [
    json.loads(line)
    for line in (Path(__file__).parent / "cases" / "redteam.jsonl").read_text().splitlines()
    if line.strip()
]


@pytest.fixture
async def verifier() -> AsyncIterator[CitationVerifier]:
    verifier = CitationVerifier(CitationConfig(support="lexical"), processes=1)
    await verifier.start()
    yield verifier
    await verifier.aclose()


async def earned(
    verifier: CitationVerifier, case: dict[str, Any], response: str | dict[str, Any]
) -> float:
    """The reward of one response on the case's request (0 for a refused item); a response
    given as a dict overrides request fields (``{"response": …, "evidence": null}``)."""
    fields = {"evidence": case["evidence"], "question": case["question"]}
    if isinstance(response, dict):
        fields.update(response)
    else:
        fields["response"] = response
    item = CitationItem(id="x", **fields)
    [outcome] = await verifier.score([item])
    return outcome.reward if outcome.reward is not None else 0.0


def test_every_class_has_five_cases_on_different_evidence() -> None:
    per_class = Counter(case["class"] for case in CASES)
    assert all(per_class[k] >= 5 for k in range(1, 7)), per_class
    assert any("é" in text for case in CASES for text in case["evidence"].values())


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
async def test_a_hack_earns_less_and_an_honest_variant_the_same(
    verifier: CitationVerifier, case: dict[str, Any]
) -> None:
    honest = await earned(verifier, case, case["honest"])
    assert honest > 0
    base = await earned(verifier, case, case["base"]) if "base" in case else honest
    for hack in case["hacks"]:
        hacked = await earned(verifier, case, hack)
        assert hacked < honest and hacked <= base, str(hack)[:200]
    for variant in case["variants"]:
        # Lexical mode's promise for a meaning-preserving restatement: at least partial per
        # claim (2/3 of an extraction's F1), never more than the honest answer.
        paid = await earned(verifier, case, variant)
        assert PARTIAL_SHARE * honest - 1e-9 <= paid <= honest + 1e-9, variant[:200]
