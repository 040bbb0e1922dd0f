"""Real data: reference solutions pass, wrong programs fail (HumanEval, MBPP, LeetCode,
CRUXEval). One test per dataset scores every item concurrently and compares the list of
misses with the explained ones.

Data: /work/shared/data/code (not copied into the repository); skipped when absent.
"""

from __future__ import annotations

import ast
import gzip
import json
import time
import warnings
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from services.code import CodeConfig, CodeItem, CodeVerifier

# Sources (in /work/shared/data/code): HumanEval (openai/human-eval, 164 problems), MBPP
# sanitized (google-research/mbpp, 427), LeetCodeDataset v0.3.1 test split
# (newfacade/LeetCodeDataset, 228), CRUXEval (facebookresearch/cruxeval, 800) and CodeLlama-7B's
# scored CRUXEval output predictions.
DATA = Path("/work/shared/data/code")


def _jsonl(name: str) -> list[dict[str, Any]]:
    path = DATA / name
    if name.endswith(".gz"):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def humaneval(mutate: bool = False) -> list[CodeItem]:
    """HumanEval: code = prompt + canonical solution; assert tests ``check(candidate)``."""
    items = []
    for row in _jsonl("humaneval.jsonl"):
        code = row["prompt"] + row["canonical_solution"]
        if mutate:
            mutated = off_by_one(code, first_line=row["prompt"].count("\n") + 1)
            if mutated is None:
                continue
            code = mutated
        items.append(
            CodeItem(
                id=row["task_id"],
                language="python",
                code=code,
                tests={"kind": "assert", "entry_point": row["entry_point"], "test": row["test"]},
            )
        )
    return items


class _ToCandidate(ast.NodeTransformer):
    def __init__(self, name: str) -> None:
        self.name = name

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return (
            ast.copy_location(ast.Name("candidate", node.ctx), node)
            if node.id == self.name
            else node
        )


def _parse(code: str) -> ast.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escapes in dataset code (DeprecationWarning)
        return ast.parse(code)


def _entry_point(code: str, assertion: str) -> str:
    """The first function the program defines that the assertion calls."""
    defined = {
        n.name for n in ast.walk(_parse(code)) if isinstance(n, ast.FunctionDef | ast.ClassDef)
    }
    for node in ast.walk(_parse(assertion)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in defined
        ):
            return node.func.id
    raise ValueError(f"no call of the program in {assertion!r}")


def mbpp() -> list[CodeItem]:
    """MBPP sanitized: the asserts, with the function renamed ``candidate``, become the body
    of ``check`` (after ``test_imports``)."""
    items = []
    for row in _jsonl("mbpp_sanitized.jsonl"):
        entry = _entry_point(row["code"], row["test_list"][0])
        lines = [ast.unparse(_ToCandidate(entry).visit(_parse(t))) for t in row["test_list"]]
        body = "\n".join(f"    {line}" for line in lines)
        test = "\n".join(row["test_imports"]) + "\n\ndef check(candidate):\n" + body + "\n"
        items.append(
            CodeItem(
                id=f"mbpp/{row['task_id']}",
                language="python",
                code=row["code"],
                tests={"kind": "assert", "entry_point": entry, "test": test},
            )
        )
    return items


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
    module = _parse(test)
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


def leetcode() -> tuple[list[CodeItem], int]:
    """LeetCodeDataset test split: function cases where every assert is a plain literal
    comparison, else an assert test with the dataset's prelude (helpers such as
    ``tree_node``/``is_same_tree``) on the trusted test side. Returns (items, function cases).
    """
    items = []
    n_cases = 0
    for row in _jsonl("leetcodedataset_v0.3.1_test.jsonl.gz"):
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
        items.append(CodeItem(id=row["task_id"], language="python", code=code, tests=tests))
    return items, n_cases


def cruxeval(wrong: bool = False) -> list[CodeItem]:
    """CRUXEval: ``assert f(input) == output`` as an assert test; with ``wrong`` the first
    incorrect CodeLlama-7B prediction replaces the recorded output."""
    items = []
    for row in _jsonl("cruxeval_output_predictions_codellama7b_scored.jsonl"):
        output = row["output"]
        if wrong:
            bad = [p for p in row["predictions"] if not p["correct"]]
            if not bad:
                continue
            output = bad[0]["predicted_output"]
        test = f"def check(candidate):\n    assert candidate({row['input']}) == {output}\n"
        try:
            _parse(test)
        except SyntaxError:
            continue  # an unparsable prediction is no test at all
        items.append(
            CodeItem(
                id=row["id"],
                language="python",
                code=row["code"],
                tests={"kind": "assert", "entry_point": "f", "test": test},
            )
        )
    return items


class _OffByOne(ast.NodeTransformer):
    def __init__(self, first_line: int) -> None:
        self.first_line = first_line
        self.done = False

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if (
            not self.done
            and getattr(node, "lineno", 0) >= self.first_line
            and type(node.value) is int
        ):
            self.done = True
            return ast.copy_location(ast.Constant(node.value + 1), node)
        return node

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        swaps = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}
        if not self.done and node.lineno >= self.first_line and type(node.ops[0]) in swaps:
            self.done = True
            node.ops[0] = swaps[type(node.ops[0])]()
        return node


def off_by_one(code: str, first_line: int) -> str | None:
    """Insert an off-by-one in the solution part of ``code`` (lines from ``first_line`` on):
    the first integer literal + 1, or else the first ``<``/``<=``/``>``/``>=`` flipped."""
    tree = _parse(code)
    mutator = _OffByOne(first_line)
    tree = mutator.visit(tree)
    return ast.unparse(tree) if mutator.done else None


pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.skipif(not DATA.is_dir(), reason="datasets not available"),
]


@pytest.fixture
async def code_verifier() -> AsyncIterator[CodeVerifier]:
    """Default limits but 10 s per case: a few reference solutions (LeetCode's
    find-the-number-of-subsequences-with-equal-gcd) need 3+ s on a loaded 2-core machine."""
    verifier = CodeVerifier(CodeConfig(slots=2, default_timeout_s=10.0))
    await verifier.start()
    yield verifier
    await verifier.aclose()


async def _misses(
    verifier: CodeVerifier, items: Sequence[CodeItem], should_pass: bool
) -> tuple[list[str], float]:
    start = time.perf_counter()
    outcomes = await verifier.score(items)
    elapsed = time.perf_counter() - start
    misses = []
    for item, outcome in zip(items, outcomes, strict=True):
        assert outcome.error is None, (item.id, outcome.error)
        if (outcome.reward == 1.0) != should_pass:
            misses.append(item.id)
    return misses, elapsed


async def test_humaneval_canonical_solutions_pass(code_verifier: CodeVerifier) -> None:
    items = humaneval()
    assert len(items) == 164
    misses, elapsed = await _misses(code_verifier, items, should_pass=True)
    assert misses == []
    print(f"HumanEval: 164 canonical solutions in {elapsed:.1f} s")


async def test_humaneval_off_by_one_mutants_fail(code_verifier: CodeVerifier) -> None:
    items = humaneval(mutate=True)
    misses, _ = await _misses(code_verifier, items, should_pass=False)
    # Surviving mutants are equivalent or untested changes (e.g. a loop bound that the tests
    # never reach); investigated at the time of writing: 21 of 133, none a sandbox fault.
    assert len(misses) <= 0.2 * len(items), misses


async def test_mbpp_reference_solutions_pass(code_verifier: CodeVerifier) -> None:
    items = mbpp()
    assert len(items) == 427
    misses, _ = await _misses(code_verifier, items, should_pass=True)
    assert misses == []


async def test_leetcode_reference_solutions_pass(code_verifier: CodeVerifier) -> None:
    items, n_cases = leetcode()
    assert len(items) == 228
    misses, elapsed = await _misses(code_verifier, items, should_pass=True)
    assert misses == []
    print(
        f"LeetCode: {n_cases} function cases + {sum(i.tests.kind == 'assert' for i in items)}"
        f" assert items in {elapsed:.1f} s"
    )


async def test_cruxeval_programs_give_their_recorded_outputs(code_verifier: CodeVerifier) -> None:
    items = cruxeval()
    assert len(items) == 800
    misses, _ = await _misses(code_verifier, items, should_pass=True)
    assert misses == CRUXEVAL_FUNCTION_ARGUMENTS


# Inputs that are functions (lambdas) cannot cross from the trusted test to the program as
# data: the program receives an opaque stand-in and fails when it calls it.
CRUXEVAL_FUNCTION_ARGUMENTS = ["sample_344", "sample_364"]


async def test_cruxeval_wrong_predictions_fail(code_verifier: CodeVerifier) -> None:
    items = cruxeval(wrong=True)
    misses, _ = await _misses(code_verifier, items, should_pass=False)
    assert misses == CRUXEVAL_WRONG_BUT_EQUAL, misses


CRUXEVAL_WRONG_BUT_EQUAL: list[str] = []
"""Predictions scored incorrect by CRUXEval (string comparison) that are equal in Python."""
