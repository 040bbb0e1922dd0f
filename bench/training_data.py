"""The three training datasets of the full-stack run, written as JSONL from the shared data.

``python -m bench.training_data OUT_DIR [--rows N]`` writes, from ``$TRIBUNAL_DATA_DIR``
(default ``../shared/data`` beside the repository root; nothing is copied into the
repository):

- ``refiner.jsonl`` for the ``refiner_rubric_citation`` spec: DR Tulu-style PubMed traces
  (their question, their content rubrics as ``positive_rubrics``, the tool outputs of their
  transcript as ``tool_output``) alternating with ScholarQA-CS questions (their rubric
  criteria as ``positive_rubrics``, each criterion's evidence as a ``<snippet id=E<k>>``).
  Every row has the same columns (a Hugging Face ``datasets`` table needs one schema):
  ``question``, ``positive_rubrics`` (strings) and ``tool_output`` (text the citation scorer
  harvests snippets from).
- ``tcr.jsonl`` for ``tcr_agent``: MATH-500 rows (``problem``, ``answer``; ``tests`` null)
  alternating with LeetCodeDataset rows (``problem``: the problem's description and starter
  code; ``tests``: the dataset's own ``check`` as an assert test, with its prelude, on the
  trusted side; ``answer`` null), so that the spec scores some rollouts with the math
  verifier and the others with the code runner.
- ``gsm8k.jsonl`` for ``rloo_math``: GSM8K's ``question`` and ``answer``.

With ``--judge-model DIR`` it also saves the judge's and the citation scorer's model for the
``transformers`` backend on CPU: a tiny random Qwen3 with a tokenizer trained on their prompts
(no model hub needed; its verdicts mean nothing, the path is real).

The trainer, tests/e2e/test_training_stack.py, bench/stack_faults.py and the tutorial
(docs/tutorial-training.md) all read these files.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.citation_data import TRACES, _jsonl, data_dir
from tribunal.citation.evidence import tool_outputs_before_answer
from tribunal.cli.datasets import DataMissing, require

SCHOLARQA_RUBRICS = "research/scholarqa_cs_rubrics.json"
LEETCODE = "code/leetcodedataset_v0.3.1_test.jsonl.gz"
MATH500 = "math/math500_test.jsonl"
GSM8K = "math/gsm8k_test.jsonl"


def _traces() -> Iterator[dict[str, Any]]:
    for row in _jsonl(data_dir() / TRACES):
        transcript = row["trajectory"]["interleaved_text"].split("<answer>")[0]
        yield {
            "question": row["question"],
            "positive_rubrics": [r["description"] for r in row["content_rubrics"]],
            "tool_output": tool_outputs_before_answer(transcript),
        }


def _scholarqa() -> Iterator[dict[str, Any]]:
    for row in json.loads((data_dir() / SCHOLARQA_RUBRICS).read_text()):
        config = row["metric_config"]["config"]
        properties = config["other_properties"]
        evidence = [text for p in properties for text in p["evidence"]]
        yield {
            "question": config["question"],
            "positive_rubrics": [p["criterion"] for p in properties],
            "tool_output": "\n".join(
                f"<snippet id=E{k}>{text}</snippet>" for k, text in enumerate(evidence, 1)
            ),
        }


def refiner_rows(n: int) -> list[dict[str, Any]]:
    """``n`` rows alternating a DR Tulu-style trace and a ScholarQA-CS question (each row
    with at least one rubric and one snippet)."""
    rows: list[dict[str, Any]] = []
    sources = [_traces(), _scholarqa()]
    while len(rows) < n:
        row = next(sources[len(rows) % 2])
        if row["positive_rubrics"] and "<snippet" in row["tool_output"]:
            rows.append(row)
    return rows


def tcr_rows(n: int) -> list[dict[str, Any]]:
    """``n`` rows alternating a MATH-500 problem and a LeetCodeDataset problem (see above)."""
    math = (
        {"problem": row["problem"], "answer": row["answer"], "tests": None}
        for row in _jsonl(data_dir() / "math" / "math500_test.jsonl")
    )
    code = (
        {
            "problem": f"{row['problem_description']}\n\n{row['starter_code']}",
            "answer": None,
            "tests": {
                "kind": "assert",
                "entry_point": row["entry_point"],
                "test": row["prompt"] + "\n" + row["test"],
            },
        }
        for row in _jsonl(data_dir() / LEETCODE)
    )
    return [next(math if k % 2 == 0 else code) for k in range(n)]


def math_rows(name: str, fields: tuple[str, str], n: int) -> list[dict[str, Any]]:
    """The first ``n`` rows of ``math/<name>`` with only ``fields`` (prompt, answer)."""
    return [{f: row[f] for f in fields} for row in _jsonl(data_dir() / "math" / name)[:n]]


def write_datasets(out: Path, n: int = 16) -> dict[str, Path]:
    """Write the three datasets (``n`` rows each) into ``out``; return their paths by spec."""
    out.mkdir(parents=True, exist_ok=True)
    tables = {
        "refiner_rubric_citation": ("refiner.jsonl", refiner_rows(n)),
        "tcr_agent": ("tcr.jsonl", tcr_rows(n)),
        "rloo_math": ("gsm8k.jsonl", math_rows("gsm8k_test.jsonl", ("question", "answer"), n)),
    }
    paths = {}
    for spec, (name, rows) in tables.items():
        paths[spec] = out / name
        paths[spec].write_text("".join(json.dumps(row) + "\n" for row in rows))
    return paths


def tiny_judge_model(out: Path) -> Path:
    """Save a random Qwen3 (hidden 32, 2 layers, 32k positions) with a byte-level BPE
    tokenizer trained on the citation judge's prompt into ``out``; return ``out``."""
    from tribunal.citation.judge import SYSTEM_PROMPT
    from tribunal.testing.tiny_model import TinyModelConfig, build_tiny_model

    sizes = TinyModelConfig(
        hidden_size=32,
        intermediate_size=64,
        head_dim=8,
        vocab_size=500,
        max_position_embeddings=32768,
    )
    corpus = [SYSTEM_PROMPT, '{"c0": {"reason": "", "verdict": 2}}'] * 20
    return build_tiny_model(sizes, corpus, out, seed=0)


def main() -> None:
    """Command line: write the datasets (and the tiny judge model) and print their paths."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="Directory to write the JSONL files into.")
    parser.add_argument("--rows", type=int, default=16, help="Rows per dataset.")
    parser.add_argument("--judge-model", type=Path, help="Also save the tiny judge model here.")
    args = parser.parse_args()
    needs = (TRACES, SCHOLARQA_RUBRICS, MATH500, LEETCODE, GSM8K)
    try:
        require(*needs, root=data_dir())
    except DataMissing as exc:
        print(exc, file=sys.stderr)
        raise SystemExit(2) from None
    paths = write_datasets(args.out, args.rows)
    if args.judge_model is not None:
        paths["judge_model"] = tiny_judge_model(args.judge_model)
    print(json.dumps({spec: str(path) for spec, path in paths.items()}))


if __name__ == "__main__":
    main()
