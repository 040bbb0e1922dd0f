"""Judge items from the seed data in ``shared/data/research`` (see its SOURCES.md).

- ScholarQA-CS (``scholarqa_cs_rubrics.json`` + ``scholarqa_cs_answers_gpt4o.jsonl.gz``):
  GPT-4o answers with the positive, weighted rubrics of ``other_properties``.
- DR Tulu-style PubMed traces (``drtulu_style_pubmed_trajectories.jsonl.gz``): the whole
  trace (tool calls and answer, since half the rubrics grade tool use) with ``all_rubrics``
  passed through unchanged in DR Tulu's ``{description, weight, title, category}`` shape.

Used by the tests (every record must become a valid item) and by benchmarks.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tribunal.wire.judge import JudgeItem

SCHOLARQA_RUBRICS = "scholarqa_cs_rubrics.json"
SCHOLARQA_ANSWERS = "scholarqa_cs_answers_gpt4o.jsonl.gz"
DRTULU_TRACES = "drtulu_style_pubmed_trajectories.jsonl.gz"


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def scholarqa_records(root: Path) -> list[dict[str, Any]]:
    """Return raw item dicts for every ScholarQA-CS answer (one per ``case_id``)."""
    cases = {c["case_id"]: c for c in json.loads((root / SCHOLARQA_RUBRICS).read_text())}
    out = []
    for answer in _jsonl(root / SCHOLARQA_ANSWERS):
        case = cases[answer["case_id"]]
        config = case["metric_config"]["config"]
        out.append(
            {
                "id": f"sqa-{answer['case_id']}",
                "question": case["initial_prompt"],
                "response": answer["answer_text"],
                "rubrics": [
                    {
                        "text": p["criterion"],
                        "weight": p["weight"],
                        "polarity": "positive",
                        "title": p["name"],
                    }
                    for p in config["other_properties"]
                ],
            }
        )
    return out


def drtulu_trace_records(root: Path) -> list[dict[str, Any]]:
    """Return raw item dicts for every DR Tulu-style trace (rubrics in DR Tulu's shape)."""
    return [
        {
            "id": row["sample_id"],
            "question": row["question"],
            "response": row["trajectory"]["interleaved_text"],
            "rubrics": row["all_rubrics"],
        }
        for row in _jsonl(root / DRTULU_TRACES)
    ]


def seed_items(root: Path) -> list[JudgeItem]:
    """Validate every seed record as a :class:`JudgeItem` (raises on the first invalid one)."""
    return [
        JudgeItem.model_validate(r) for r in scholarqa_records(root) + drtulu_trace_records(root)
    ]
