"""Real data: reference solutions pass, wrong programs fail (HumanEval, MBPP, LeetCode,
CRUXEval). One test per dataset scores its items concurrently and compares the list of
misses with the explained ones: one item in four in the suite, every item in the extended lane.

Data: $TRIBUNAL_DATA_DIR/code (not copied into the repository); skipped when absent (fails
under CI=true).
"""

from __future__ import annotations

import ast
import time
from collections.abc import AsyncIterator, Sequence

import pytest

from bench import code_data
from bench.code_data import DATA, humaneval_item
from bench.code_data import jsonl as _jsonl
from bench.code_data import parse as _parse
from tests.conftest import need_data
from tribunal.code import CodeConfig, CodeItem, CodeVerifier
from tribunal.wire.code import Limits

# Sources (in $TRIBUNAL_DATA_DIR/code): HumanEval (openai/human-eval, 164 problems), MBPP
# sanitized (google-research/mbpp, 427), LeetCodeDataset v0.3.1 test split
# (newfacade/LeetCodeDataset, 228), CRUXEval (facebookresearch/cruxeval, 800) and CodeLlama-7B's
# scored CRUXEval output predictions. The HumanEval and LeetCode loaders live in
# bench/code_data.py, shared with bench/code_throughput.py.


def humaneval(mutate: bool = False) -> list[CodeItem]:
    """HumanEval: code = prompt + canonical solution; assert tests ``check(candidate)``."""
    items = []
    for row in _jsonl("humaneval.jsonl"):
        code = None
        if mutate:
            code = off_by_one(
                row["prompt"] + row["canonical_solution"], first_line=row["prompt"].count("\n") + 1
            )
            if code is None:
                continue
        items.append(CodeItem.model_validate(humaneval_item(row, code)))
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
        # The reference's helpers (classes such as Pair that a test builds its arguments
        # from): the test brings them, since only the entry point is taken from the program.
        helpers = code_data.prompt_helpers(row["code"], entry)
        test = "\n".join([*row["test_imports"], helpers]) + "\n\ndef check(candidate):\n"
        test += body + "\n"
        items.append(
            CodeItem(
                id=f"mbpp/{row['task_id']}",
                language="python",
                code=row["code"],
                tests={"kind": "assert", "entry_point": entry, "test": test},
            )
        )
    return items


def leetcode() -> list[CodeItem]:
    """LeetCodeDataset test split (see ``bench.code_data.leetcode``)."""
    rows, _ = code_data.leetcode()
    return [CodeItem.model_validate(row) for row in rows]


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
        # Inputs that name the code's own data (sample_258's thigh_o_two): the test defines
        # them from the dataset's code, since only the entry point is taken from the program.
        test = f"{code_data.prompt_helpers(row['code'], 'f')}\n\n{test}"
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
    pytest.mark.usefixtures("_code_data"),
]


@pytest.fixture
def _code_data() -> None:
    need_data(DATA)


@pytest.fixture(
    params=[
        pytest.param(4, id="every-4th"),
        pytest.param(1, id="all", marks=pytest.mark.extended),
    ]
)
def every(request: pytest.FixtureRequest) -> int:
    """Score every ``every``-th item of a set (by position: the same items each run). The
    suite takes one in four; the extended lane (``make test-extended``) all of them, which
    are minutes of sandboxed CPU on 2 cores."""
    return int(request.param)


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


async def test_humaneval_canonical_solutions_pass(code_verifier: CodeVerifier, every: int) -> None:
    items = humaneval()
    assert len(items) == 164
    items = items[::every]
    misses, elapsed = await _misses(code_verifier, items, should_pass=True)
    assert misses == []
    print(f"HumanEval: {len(items)} canonical solutions in {elapsed:.1f} s")


async def test_humaneval_off_by_one_mutants_fail(code_verifier: CodeVerifier, every: int) -> None:
    items = humaneval(mutate=True)[::every]
    misses, _ = await _misses(code_verifier, items, should_pass=False)
    # Surviving mutants are equivalent or untested changes (e.g. a loop bound that the tests
    # never reach); investigated at the time of writing: 21 of 133, none a sandbox fault.
    assert len(misses) <= 0.2 * len(items), misses


async def test_mbpp_reference_solutions_pass(code_verifier: CodeVerifier, every: int) -> None:
    items = mbpp()
    assert len(items) == 427
    items = items[::every]
    misses, _ = await _misses(code_verifier, items, should_pass=True)
    assert misses == []


async def test_leetcode_reference_solutions_pass(code_verifier: CodeVerifier, every: int) -> None:
    items = leetcode()
    assert len(items) == 228
    items = items[::every]
    # A correctness test must not depend on the machine's load: the sandbox's limit is wall
    # time, and find-the-number-of-subsequences-with-equal-gcd needs 5.8 s alone and failed
    # its 10 s under a load average of ~5. Reference solutions get the largest limit an item
    # may ask for (30 s, max_timeout_s): about 5x headroom over their slowest unloaded case.
    items = [item.model_copy(update={"limits": Limits(timeout_s=30.0)}) for item in items]
    misses, elapsed = await _misses(code_verifier, items, should_pass=True)
    assert misses == []
    print(
        f"LeetCode: {sum(i.tests.kind != 'assert' for i in items)} function items +"
        f" {sum(i.tests.kind == 'assert' for i in items)}"
        f" assert items in {elapsed:.1f} s"
    )


async def test_cruxeval_programs_give_their_recorded_outputs(
    code_verifier: CodeVerifier, every: int
) -> None:
    items = cruxeval()
    assert len(items) == 800
    items = items[::every]
    misses, _ = await _misses(code_verifier, items, should_pass=True)
    ids = {item.id for item in items}
    assert misses == [miss for miss in CRUXEVAL_FUNCTION_ARGUMENTS if miss in ids]


# Inputs that are functions (lambdas) cannot cross from the trusted test to the program as
# data: the program receives an opaque stand-in and fails when it calls it.
CRUXEVAL_FUNCTION_ARGUMENTS = ["sample_344", "sample_364"]


async def test_cruxeval_wrong_predictions_fail(code_verifier: CodeVerifier, every: int) -> None:
    items = cruxeval(wrong=True)[::every]
    misses, _ = await _misses(code_verifier, items, should_pass=False)
    ids = {item.id for item in items}
    assert misses == [miss for miss in CRUXEVAL_WRONG_BUT_EQUAL if miss in ids], misses


CRUXEVAL_WRONG_BUT_EQUAL: list[str] = []
"""Predictions scored incorrect by CRUXEval (string comparison) that are equal in Python."""
