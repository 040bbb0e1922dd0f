"""Reasoning-model outputs with independent labels: Sky-T1's MATH-500, AIME 2024 and AMC 2023
outputs, as math items (plain dicts).

Data: ``$TRIBUNAL_DATA_DIR/math/sky_t1`` (default ``../shared/data`` beside the repository;
``tribunal data fetch`` gets it; not copied into the repository). Source (see
``shared/data/SOURCES.md``): NovaSky-AI/SkyThought@6840eb7 (Apache-2.0), the evaluation
outputs of six Sky-T1 32B and 27B models (QwQ-distilled reasoning models) that SkyThought
committed from its Qwen2.5-Math harness: each row is one greedy output and the harness's
``score``, its rule-based grader's verdict on the answer it extracted from the output
(``pred``; the label: it was not made with Tribunal or Math-Verify). Shared by
``tests/math/test_reasoning_outputs.py`` and ``bench/math_fidelity.py``, so both score
exactly the same items.

What is taken, by rule and not by hand:

- **Complete outputs only**: the reasoning block is closed (``<|end_of_thought|>``) and so
  is the solution (``<|end_of_solution|>``). An output cut off by the harness's token limit
  has its answer, if any, only in the drafts: its label says what the grader found there.
- **The reasoning block is spelled ``<think>…</think>``**: Sky-T1 writes
  ``<|begin_of_thought|>…<|end_of_thought|>``, the same block under its own markers; they
  are replaced, nothing else is touched (``<|begin_of_solution|>`` stays as text).
- **The gold** is the harness's own: MATH-500's ``answer`` for MATH-500 (the file carries it,
  the same as ``math/math500_test.jsonl``), ``gt`` for AIME and AMC.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

FILES = {
    "math/sky_t1/Sky-T1-math-correct-5K-27B_math500.jsonl.gz": "math500",
    "math/sky_t1/Sky-T1-math-reflection-0.2-32B_aime24.jsonl.gz": "aime24",
    "math/sky_t1/Sky-T1-math-reflection-1.0-32B_aime24.jsonl.gz": "aime24",
    "math/sky_t1/Sky-T1-math-corrupt-0.2-32B_aime24.jsonl.gz": "aime24",
    "math/sky_t1/Sky-T1-math-corrupt-0.5-32B_aime24.jsonl.gz": "aime24",
    "math/sky_t1/Sky-T1-math-correct-5K-32B-checkpoint-140_aime24.jsonl.gz": "aime24",
    "math/sky_t1/Sky-T1-math-corrupt-0.2-32B_amc23.jsonl.gz": "amc23",
}
"""The data files (``tribunal.cli.datasets.DATASETS``) and the benchmark each answers."""

THOUGHT = ("<|begin_of_thought|>", "<|end_of_thought|>")
SOLUTION_END = "<|end_of_solution|>"


def data_dir() -> Path:
    """``$TRIBUNAL_DATA_DIR`` or ``../shared/data`` relative to the repository root."""
    return Path(os.environ.get("TRIBUNAL_DATA_DIR", ROOT.parent / "shared" / "data"))


def missing() -> list[str]:
    """The data files that are not in the data directory."""
    return [name for name in FILES if not (data_dir() / name).is_file()]


def rows() -> list[dict[str, Any]]:
    """The complete outputs as ``{id, model, benchmark, ground_truth, correct, response}``.

    ``id`` is ``<benchmark>/<model>/<harness idx>``
    (``math500/Sky-T1-math-correct-5K-27B/162``); ``correct`` is the harness's ``score``;
    ``response`` has its reasoning block as ``<think>…</think>`` (see the module docstring).

    Raises:
        FileNotFoundError: a data file is missing (``tribunal data fetch`` gets it).
    """
    items = []
    for name, benchmark in FILES.items():
        model = name.rsplit("/", 1)[1].split("_")[0]
        with gzip.open(data_dir() / name, "rt", encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                output = row["code"][0]
                if THOUGHT[1] not in output or SOLUTION_END not in output:
                    continue
                response = output.replace(THOUGHT[0], "<think>").replace(THOUGHT[1], "</think>")
                items.append(
                    {
                        "id": f"{benchmark}/{model}/{row['idx']}",
                        "model": model,
                        "benchmark": benchmark,
                        "ground_truth": row["answer"] if benchmark == "math500" else row["gt"],
                        "correct": bool(row["score"][0]),
                        "response": response,
                    }
                )
    return items
