"""The DR Tulu-style PubMed traces and SciFact claims as citation items (plain dicts).

Data: ``$TRIBUNAL_DATA_DIR/research`` (default ``../shared/data/research`` beside the
repository root; not copied into the repository). Shared by ``bench/citation_throughput.py``
and ``tests/citation/test_datasets.py``, so both score exactly the same items.

Sources (see ``shared/data/SOURCES.md``): ``drtulu_style_pubmed_trajectories.jsonl.gz``
(liyc-sys/dr-tulu@bf73bd7, 46 traces in DR Tulu's tool protocol) and
``scifact_claims_test.jsonl`` (AkariAsai/ScholarQABench@95e6fc5, 208 SciFact claims).
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

from tribunal.citation.evidence import tool_outputs_before_answer
from tribunal.citation.verifier import item_chars
from tribunal.wire.citation import CitationItem

ROOT = Path(__file__).resolve().parents[1]


def data_dir() -> Path:
    """``$TRIBUNAL_DATA_DIR`` or ``../shared/data`` relative to the repository root."""
    return Path(os.environ.get("TRIBUNAL_DATA_DIR", ROOT.parent / "shared" / "data"))


def _jsonl(path: Path) -> list[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


TRACES = "research/drtulu_style_pubmed_trajectories.jsonl.gz"
SCIFACT = "research/scifact_claims_test.jsonl"


def trace_items() -> list[dict[str, Any]]:
    """The 46 traces as ``/v1/citation/score`` items.

    The response is the trace's transcript (searches and their ``<tool_output>``) followed by
    ``<answer>final_answer</answer>``: some transcripts stop before their answer block. The
    evidence is the transcript's tool outputs, sent as the item's ``tool_output``, as a trainer
    that inserted them would (the verifier never reads evidence from the response).
    """
    items = []
    for row in _jsonl(data_dir() / TRACES):
        trajectory = row["trajectory"]
        transcript = trajectory["interleaved_text"].split("<answer>")[0]
        response = f"{transcript}<answer>\n{trajectory['final_answer']}\n</answer>"
        items.append(
            {
                "id": row["sample_id"],
                "question": row["question"],
                "response": response,
                "tool_output": tool_outputs_before_answer(transcript),
            }
        )
    return items


def scifact_rows() -> list[tuple[str, str, bool]]:
    """(claim, abstract with its title, whether the abstract supports the claim)."""
    out = []
    for row in _jsonl(data_dir() / SCIFACT):
        context = row["gold_ctx"][0]
        out.append(
            (row["input"], f"{context['title']}. {context['text']}", row["answer"] == "true")
        )
    return out


SIZE_LIMIT = 16_384
"""Characters of text of the largest item the worker used to check on its own event loop."""


def item_at_the_size_limit(item_id: str) -> CitationItem:
    """An answer of 24 claims, distinct and cited, against one snippet, ``SIZE_LIMIT``
    characters of text in all (the claim clauses × snippet clauses of the old inline path)."""
    claims = " ".join(
        f"<cite id=S1>Tumour growth rate doubled in {k} of 131 patients on anti-PD-1 in "
        f"cohort {k}, and progression was not slower.</cite>"
        for k in range(24)
    )
    response = f"<answer>{claims}</answer>"
    # A snippet of its own (no snippet cache shared between the items).
    sentence = f"In cohort {item_id}, tumour growth rate doubled in 7 of 131 patients. "
    snippet = (sentence * (SIZE_LIMIT // len(sentence)))[: SIZE_LIMIT - len(response) - 2]
    item = CitationItem(id=item_id, response=response, evidence={"S1": snippet}, question="HPD?")
    assert item_chars(item) == SIZE_LIMIT
    return item
