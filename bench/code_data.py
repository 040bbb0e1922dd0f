"""HumanEval and LeetCodeDataset as ``/v1/code/score`` items (plain JSON-able dicts).

Data: ``$TRIBUNAL_DATA_DIR/code`` (default ``../shared/data/code``; not copied into the
repository). Shared by ``bench/code_throughput.py`` and ``tests/code/test_datasets.py`` (which
validates the dicts into ``CodeItem``\\ s), so both score exactly the same items.

Sources: HumanEval (openai/human-eval, 164 problems) and LeetCodeDataset v0.3.1 test split
(newfacade/LeetCodeDataset, 228 problems).
"""

from __future__ import annotations

import ast
import copy
import functools
import gzip
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any

DATA = (
    Path(
        os.environ.get("TRIBUNAL_DATA_DIR", Path(__file__).resolve().parents[2] / "shared" / "data")
    )
    / "code"
)


def jsonl(name: str) -> list[dict[str, Any]]:
    """Rows of ``DATA / name`` (``.jsonl`` or ``.jsonl.gz``)."""
    path = DATA / name
    if not path.is_file():
        from tribunal.cli.datasets import missing_line

        print(missing_line(path), file=sys.stderr)
        raise SystemExit(2)
    if name.endswith(".gz"):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def parse(code: str) -> ast.Module:
    """``ast.parse`` without the DeprecationWarnings of invalid escapes in dataset code."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(code)


def prompt_helpers(prompt: str, entry_point: str) -> str:
    """The prompt's own code but the entry point's stub: its imports and the helpers its test
    calls (``poly`` of HumanEval/32, ``encode_cyclic`` of /38, ``encode_shift`` of /50). The
    sandbox takes only the entry point from the program, so the test brings these itself:
    the program's versions would be handed the expected values."""
    kept = [
        node
        for node in parse(prompt).body
        if not (isinstance(node, ast.FunctionDef) and node.name == entry_point)
    ]
    return ast.unparse(ast.Module(body=kept, type_ignores=[]))


def humaneval_item(row: dict[str, Any], code: str | None = None) -> dict[str, Any]:
    """One HumanEval row as an item: code = prompt + canonical solution (or ``code``);
    assert tests ``check(candidate)``, after the prompt's helpers."""
    entry = row["entry_point"]
    helpers = prompt_helpers(row["prompt"], entry)
    return {
        "id": row["task_id"],
        "language": "python",
        "code": row["prompt"] + row["canonical_solution"] if code is None else code,
        "tests": {
            "kind": "assert",
            "entry_point": entry,
            "test": f"{helpers}\n\n{row['test']}" if helpers else row["test"],
        },
    }


def humaneval() -> list[dict[str, Any]]:
    """The 164 HumanEval canonical solutions."""
    return [humaneval_item(row) for row in jsonl("humaneval.jsonl")]


def _json_value(value: Any) -> Any:
    """A literal as JSON (tuples become lists); raise ValueError for non-JSON literals."""
    if value is None or type(value) in (bool, int, str):
        return value
    if type(value) is float:
        return value
    if type(value) in (list, tuple):
        return [_json_value(v) for v in value]
    if type(value) is dict and all(type(k) is str for k in value):
        return {k: _json_value(v) for k, v in value.items()}
    raise ValueError(f"not JSON: {type(value).__name__}")


def leetcode_cases(test: str) -> list[dict[str, Any]] | None:
    """The LeetCode ``check`` as function cases, or None when an assert is not a plain
    ``candidate(**literals) == literal``."""
    module = parse(test)
    check = next(n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "check")
    cases = []
    for statement in check.body:
        if not isinstance(statement, ast.Assert):
            return None
        compare = statement.test
        if not (
            isinstance(compare, ast.Compare)
            and len(compare.ops) == 1
            and isinstance(compare.ops[0], ast.Eq)
            and isinstance(compare.left, ast.Call)
            and isinstance(compare.left.func, ast.Name)
            and compare.left.func.id == "candidate"
        ):
            return None
        try:
            args = [_json_value(ast.literal_eval(a)) for a in compare.left.args]
            kwargs = {k.arg: _json_value(ast.literal_eval(k.value)) for k in compare.left.keywords}
            expected = _json_value(ast.literal_eval(compare.comparators[0]))
        except ValueError:
            return None
        if any(key is None for key in kwargs):
            return None
        cases.append({"args": args, "kwargs": kwargs, "expected": expected})
    return cases


def leetcode() -> tuple[list[dict[str, Any]], int]:
    """LeetCodeDataset test split: function cases where every assert is a plain literal
    comparison, else an assert test with the dataset's prelude (helpers such as
    ``tree_node``/``is_same_tree``) on the trusted test side. Returns (items, function cases).

    The items are built once per process (parsing the 228 tests' asserts takes some 5 s; the
    suite asks for them from several tests); each call returns a copy of its own to change.
    """
    return copy.deepcopy(_leetcode())


@functools.cache
def _leetcode() -> tuple[list[dict[str, Any]], int]:
    """:func:`leetcode`'s items, built (the copy every call shares)."""
    items = []
    n_cases = 0
    for row in jsonl("leetcodedataset_v0.3.1_test.jsonl.gz"):
        code = row["prompt"] + "\n" + row["completion"]
        cases = leetcode_cases(row["test"])
        if cases is not None:
            n_cases += len(cases)
            tests: dict[str, Any] = {
                "kind": "function",
                "entry_point": row["entry_point"],
                "cases": cases,
            }
        else:
            tests = {
                "kind": "assert",
                "entry_point": row["entry_point"],
                "test": row["prompt"] + "\n" + row["test"],
            }
        items.append({"id": row["task_id"], "language": "python", "code": code, "tests": tests})
    return items, n_cases
