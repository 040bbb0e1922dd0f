"""Task splits read from the public data sets in the data directory (``tribunal data path``).

A task is addressed by ``(split, index)``; its public part (what a client sees: the question,
the function to write) and its private part (the gold answer, the tests) are kept apart, so
that a protocol hands out only the public part and a client can never supply its own gold.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from tribunal.cli.datasets import FETCH_COMMAND, data_dir


@dataclass(frozen=True)
class Task:
    """One task of a split.

    Attributes:
        id: Stable across reads (the data set's own id, or ``<split>/<index>``).
        prompt: The text the agent is given.
        public: What a client may see besides the prompt (JSON).
        private: What only the verifier sees: the gold answer, the tests (JSON).
    """

    id: str
    prompt: str
    public: Mapping[str, Any]
    private: Mapping[str, Any]


@dataclass(frozen=True)
class Split:
    """A split: its file under the data directory and how a row becomes a :class:`Task`.

    Attributes:
        name: The split's name in a protocol (``gsm8k_test``).
        kind: ``train``, ``validation`` or ``test`` (the Open Reward Standard's split types).
        path: The file under the data directory (JSON Lines).
        to_task: ``(row, index) -> Task``.
    """

    name: str
    kind: str
    path: str
    to_task: Callable[[Mapping[str, Any], int], Task]

    def tasks(self) -> tuple[Task, ...]:
        """Every task of the split, read once per process.

        Raises:
            FileNotFoundError: The data set is not in the data directory (the message names
                the command that fetches it).
        """
        return _read(self, data_dir())


@cache
def _read(split: Split, root: Path) -> tuple[Task, ...]:
    file = root / split.path
    if not file.exists():
        raise FileNotFoundError(f"{file} is missing: run `{FETCH_COMMAND}`")
    text = gzip.decompress(file.read_bytes()).decode() if file.suffix == ".gz" else None
    lines = (text if text is not None else file.read_text(encoding="utf-8")).splitlines()
    rows = [line for line in lines if line.strip()]
    return tuple(split.to_task(json.loads(line), index) for index, line in enumerate(rows))


def gsm8k_task(row: Mapping[str, Any], index: int) -> Task:
    """A GSM8K row: the gold is the text after its ``####`` line."""
    gold = str(row["answer"]).rsplit("####", 1)[1].strip()
    return Task(f"gsm8k/{index}", str(row["question"]), {}, {"ground_truth": gold})


def math500_task(row: Mapping[str, Any], index: int) -> Task:
    """A MATH-500 row: the gold is its ``answer`` field."""
    task_id = str(row.get("unique_id", f"math500/{index}"))
    return Task(task_id, str(row["problem"]), {}, {"ground_truth": str(row["answer"])})


def humaneval_task(row: Mapping[str, Any], index: int) -> Task:
    """A HumanEval row: write ``entry_point``; its ``check(candidate)`` tests are private."""
    entry = str(row["entry_point"])
    prompt = (
        f"Complete the Python function `{entry}` below and submit the whole program.\n\n"
        f"{row['prompt']}"
    )
    tests = {"kind": "assert", "entry_point": entry, "test": str(row["test"])}
    return Task(str(row["task_id"]), prompt, {"entry_point": entry}, {"tests": tests})


def mbpp_task(row: Mapping[str, Any], index: int) -> Task:
    """An MBPP (sanitized) row: its asserts, run after the program, are private; the first is
    shown, as MBPP's own prompt does, so that the function's name and signature are known."""
    asserts = [str(line) for line in row["test_list"]]
    imports = "".join(f"{line}\n" for line in row.get("test_imports", []))
    test = imports + "def check(candidate):\n" + "".join(f"    {a}\n" for a in asserts)
    prompt = f"{row['prompt']}\nYour code should pass this test:\n{asserts[0]}"
    entry = _called_name(asserts[0])
    tests = {"kind": "assert", "entry_point": entry, "test": test}
    return Task(f"mbpp/{row['task_id']}", prompt, {"entry_point": entry}, {"tests": tests})


def _called_name(assertion: str) -> str:
    """The function an MBPP assert calls: the first name followed by ``(`` after ``assert``
    that is not a builtin it wraps the call in (``set(f(x)) == ...``)."""
    wrappers = {"set", "sorted", "list", "tuple", "abs", "math", "round", "str", "int", "float"}
    for name in re.findall(r"([A-Za-z_][A-Za-z_0-9]*)\s*\(", assertion):
        if name not in wrappers:
            return str(name)
    raise ValueError(f"no function call in {assertion!r}")


REFINER_SPEC = "refiner_instance_rubrics"
"""The gateway's reward spec of the refiner: the rubric judge over the task's own rubrics plus
the citation score (``services/tribunal/gateway/specs/refiner_instance_rubrics.yaml``)."""


def refiner_task(row: Mapping[str, Any], index: int) -> Task:
    """A Dr. Tulu-style PubMed trajectory: its search results (the ``<tool_output>`` blocks the
    agent received) are the observation; its content rubrics, private, are what the judge
    grades the final answer on."""
    outputs = re.findall(
        r"<tool_output>(.*?)</tool_output>", str(row["trajectory"]["interleaved_text"]), re.S
    )
    search = "\n".join(output.strip() for output in outputs)
    prompt = (
        f"Question: {row['question']}\n\nSearch results:\n{search}\n\n"
        "Answer in <answer>...</answer>, wrapping each claim as "
        '<cite id="ID">claim</cite> with the ids of the snippets that support it.'
    )
    rubrics = [
        {
            "title": str(rubric["title"]),
            "description": str(rubric["description"]),
            "weight": float(rubric["weight"]),
        }
        for rubric in row["content_rubrics"]
    ]
    private = {"question": str(row["question"]), "rubrics": rubrics, "tool_output": search}
    return Task(str(row["sample_id"]), prompt, {}, private)
