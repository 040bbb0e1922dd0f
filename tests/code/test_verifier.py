"""verifier.py: the Verifier protocol, refusal to start, options, languages, run details."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from pydantic import ValidationError

from tests.code.test_hostile import assert_no_processes
from tests.documents import assert_documented
from tribunal.code import (
    CodeConfig,
    CodeItem,
    CodeRunVerifier,
    CodeSettings,
    CodeVerifier,
    RunItem,
)
from tribunal.core.verifier import Verifier, verifier_info
from tribunal.wire.envelope import result_json
from tribunal.wire.errors import ConfigurationError

SQUARE = {
    "kind": "stdio",
    "cases": [{"stdin": f"{k}\n", "stdout": f"{k * k}\n"} for k in range(5)],
}


def _item(code: str, tests: dict[str, Any] = SQUARE, **kw: Any) -> CodeItem:
    return CodeItem(id="x", language=kw.pop("language", "python"), code=code, tests=tests, **kw)


async def test_refuses_to_start_without_bubblewrap() -> None:
    verifier = CodeVerifier(CodeConfig(bwrap_path="/nonexistent/bwrap"))
    with pytest.raises(ConfigurationError, match="apt-get install -y bubblewrap"):
        await verifier.start()


async def test_refuses_to_start_when_the_sandbox_does_not_work() -> None:
    verifier = CodeRunVerifier(CodeConfig(bwrap_path="/bin/false"))
    with pytest.raises(ConfigurationError, match="seccomp"):
        await verifier.start()


async def test_isolation_none_is_loud(caplog: pytest.LogCaptureFixture) -> None:
    verifier = CodeVerifier(CodeConfig(isolation="none", slots=1))
    with caplog.at_level(logging.WARNING):
        await verifier.start()
    try:
        assert any("WITHOUT a sandbox" in r.message for r in caplog.records)
        [outcome] = await verifier.score([_item("print(int(input()) ** 2)")])
        assert outcome.reward == 1.0
        assert outcome.details["isolation"].startswith("none")
    finally:
        await verifier.aclose()


def test_settings_build_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIBUNAL_CODE_ISOLATION", "none")
    monkeypatch.setenv("TRIBUNAL_CODE_SLOTS", "3")
    monkeypatch.setenv("TRIBUNAL_CODE_MAX_TIMEOUT_S", "12")
    config = CodeSettings().code.config()
    assert (config.isolation, config.slots, config.max_timeout_s) == ("none", 3, 12.0)
    assert CodeSettings(code={"slots": 0}).code.config().slots >= 1


def test_protocol_and_cache_payloads() -> None:
    scorer, runner = CodeVerifier(CodeConfig()), CodeRunVerifier(CodeConfig())
    assert isinstance(scorer, Verifier) and isinstance(runner, Verifier)
    assert (scorer.name, runner.name) == ("code", "code_run")
    item = _item("print(1)")
    payload = scorer.cache_payload(item)
    assert payload is not None and "id" not in payload and payload["code"] == "print(1)"
    assert runner.cache_payload(RunItem(id="r", language="python", code="")) is None
    assert scorer.config_hash() == CodeVerifier(CodeConfig(slots=7)).config_hash()
    # Pinned: the defaults' hash (moved once, by the seccomp field: a filtered program may
    # earn another verdict, so results cached without the filter are not reused).
    assert scorer.config_hash() == "8066e21a6cbca754"
    assert scorer.config_hash() != CodeVerifier(CodeConfig(seccomp=False)).config_hash()
    assert scorer.config_hash() != CodeVerifier(CodeConfig(default_timeout_s=1)).config_hash()


async def test_pass_rate_and_options(code_verifier: CodeVerifier) -> None:
    wrong_on_two = "k = int(input())\nprint(k * k + (k == 2))"
    [rate, strict, early] = await code_verifier.score(
        [
            _item(wrong_on_two),
            _item(wrong_on_two, options={"all_or_nothing": True}),
            _item(wrong_on_two, options={"stop_on_first_failure": True}),
        ]
    )
    assert rate.reward == 0.8 and rate.details["passed"] == 4
    assert not rate.details["all_passed"]
    assert strict.reward == 0.0
    # The cases run in a random order: those run before case 2 (the one failure) pass, the
    # rest are skipped, and the pass rate counts what passed.
    verdicts = [t["verdict"] for t in early.details["tests"]]
    assert verdicts[2] == "wrong_answer"
    assert set(verdicts[:2] + verdicts[3:]) <= {"accepted", "skipped"}
    assert early.reward == verdicts.count("accepted") / 5


async def test_a_failed_stdio_case_shows_the_start_of_its_output(
    code_verifier: CodeVerifier,
) -> None:
    # What a program printed instead of the answer (the reward inspector shows it): only on
    # failed cases, capped, and made safe for JSON like every program-written text.
    noisy = (
        "import sys\nk = int(input())\nsys.stderr.write('note\\ud800' * 1000)\n"
        "print(k * k if k != 2 else 'PASSED ' * 1000)"
    )
    [outcome] = await code_verifier.score([_item(noisy)])
    tests = outcome.details["tests"]
    assert [t["verdict"] for t in tests] == ["accepted"] * 2 + ["wrong_answer"] + ["accepted"] * 2
    assert all("stdout" not in t and "stderr" not in t for k, t in enumerate(tests) if k != 2)
    failed = tests[2]
    assert failed["stdout"].startswith("PASSED PASSED") and len(failed["stdout"]) <= 256
    assert failed["stderr"].startswith("note") and len(failed["stderr"]) <= 256
    json.loads(result_json("x", outcome, verifier_info(code_verifier)))


async def test_float_tolerance(code_verifier: CodeVerifier) -> None:
    tests = {"kind": "stdio", "cases": [{"stdin": "", "stdout": "0.333333"}]}
    code = "print(1 / 3)"
    [exact, tolerant] = await code_verifier.score(
        [_item(code, tests), _item(code, tests, options={"float_tolerance": 1e-5})]
    )
    assert (exact.reward, tolerant.reward) == (0.0, 1.0)


async def test_function_verdicts(code_verifier: CodeVerifier) -> None:
    tests = {
        "kind": "function",
        "entry_point": "Solution().f",
        "cases": [
            {"args": [1], "expected": 1},
            {"args": [2], "expected": 2},
            {"args": [3], "expected": 3},
            {"kwargs": {"x": 4}, "expected": 4},
            {"args": [5], "expected": 5},
        ],
    }
    code = """
import time
class Solution:
    def f(self, x):
        if x == 2: raise ValueError("two")
        if x == 3: time.sleep(10)
        if x == 5: return bytearray(1 << 40)
        return x
"""
    [outcome] = await code_verifier.score([_item(code, tests, limits={"timeout_s": 1})])
    verdicts = [t["verdict"] for t in outcome.details["tests"]]
    assert verdicts == ["accepted", "runtime_error", "time_limit", "accepted", "memory_limit"]
    assert "ValueError: two" in outcome.details["tests"][1]["message"]


async def test_program_faults_are_verdicts_not_errors(code_verifier: CodeVerifier) -> None:
    tests = {"kind": "function", "entry_point": "missing", "cases": [{"expected": 1}]}
    [syntax, missing, bad_test] = await code_verifier.score(
        [
            _item("def f(:\n"),
            _item("def f(): return 1", tests),
            _item(
                "def f(): return 1",
                {"kind": "assert", "entry_point": "f", "test": "def nope(c): pass"},
            ),
        ]
    )
    assert syntax.details["tests"][0]["verdict"] == "compile_error" and syntax.reward == 0.0
    assert missing.details["tests"][0]["verdict"] == "runtime_error"
    assert bad_test.error is not None and bad_test.error.code == "bad_input"
    assert bad_test.error.field == "tests.test"


async def test_cpp_stdio(code_verifier: CodeVerifier) -> None:
    code = "#include <iostream>\nint main(){long k; std::cin >> k; std::cout << k * k << '\\n';}"
    broken = "int main() { return }"
    [ok, error] = await code_verifier.score(
        [_item(code, language="cpp"), _item(broken, language="c++")]
    )
    assert ok.reward == 1.0, ok
    assert error.reward == 0.0 and error.details["tests"][0]["verdict"] == "compile_error"
    assert "expected" in error.details["compile_message"]


async def test_run_details(run_verifier: CodeRunVerifier) -> None:
    code = "import sys\nprint(input()[::-1])\nprint('oops', file=sys.stderr)\nsys.exit(3)"
    [outcome] = await run_verifier.score(
        [RunItem(id="r", language="python", code=code, stdin="abc\n")]
    )
    assert outcome.reward is None and outcome.error is None
    assert outcome.details == {
        "stdout": "cba\n",
        "stderr": "oops\n",
        "stdout_truncated": False,
        "stderr_truncated": False,
        "exit_code": 3,
        "verdict": "runtime_error",
        "time_ms": outcome.details["time_ms"],
    }
    [killed] = await run_verifier.score(
        [RunItem(id="k", language="python", code="import os, signal\nos.kill(os.getpid(), 9)")]
    )
    assert killed.details["exit_code"] == 137


@pytest.mark.slow
async def test_many_items_run_concurrently(code_verifier: CodeVerifier) -> None:
    items = [
        CodeItem(
            id=str(k), language="python", code=f"print(int(input()) ** 2 + {k % 2})", tests=SQUARE
        )
        for k in range(40)
    ]
    outcomes = await code_verifier.score(items)
    assert [o.reward for o in outcomes] == [1.0 if k % 2 == 0 else 0.0 for k in range(40)]


def _leetcode_item(task_id: str, **inputs: Any) -> CodeItem:
    """A LeetCodeDataset item (bench.code_data) with ``code`` replaced by ``inputs``."""
    from bench.code_data import leetcode

    rows, _ = leetcode()
    [row] = [r for r in rows if r["id"] == task_id]
    row.pop("code")
    return CodeItem.model_validate({**row, **inputs})


def _response(task_id: str, field: str = "response") -> str:
    from bench.code_data import jsonl

    rows = jsonl("leetcodedataset_v0.3.1_test.jsonl.gz")
    return str(next(r[field] for r in rows if r["task_id"] == task_id))


@pytest.mark.slow
async def test_a_raw_completion_is_scored_on_its_last_block(code_verifier: CodeVerifier) -> None:
    task = "shortest-distance-after-road-addition-queries-i"
    fenced = _leetcode_item(task, response=_response(task))
    unfenced = _leetcode_item(task, response=_response(task, "completion"))
    other = _leetcode_item(
        task, response="```cpp\nint main() { return 0; }\n```", id="other-language"
    )
    usage = "minimum-division-operations-to-make-array-non-decreasing"
    trailing_example = _leetcode_item(usage, response=_response(usage))
    outcomes = await code_verifier.score([fenced, unfenced, other, trailing_example])
    good, bare, cpp, example = outcomes
    assert good.error is None and good.reward == 1.0
    assert good.details["extracted_code"].startswith("from typing import List\nimport heapq")
    assert good.details["passed"] == good.details["total"] > 0
    # No block of the item's language: the completion's fault, a reward of 0 with the reason.
    for outcome in (bare, cpp):
        assert outcome.error is None and outcome.reward == 0.0
        assert outcome.details["tests"] == [] and outcome.details["passed"] == 0
    assert bare.details["no_code_reason"] == "no fenced ```python block in response"
    assert cpp.details["no_code_reason"] == "no ```python block in response (found only: cpp)"
    assert "extracted_code" not in bare.details
    # Known issue: the last block is a usage example; it runs and fails, as it would upstream.
    assert example.error is None and example.reward == 0.0
    assert example.details["extracted_code"].startswith("sol = Solution()")


def test_code_and_response_exactly_one() -> None:
    tests = SQUARE
    with pytest.raises(ValidationError, match="not both") as both:
        CodeItem.model_validate(
            {"id": "x", "language": "python", "code": "1", "response": "1", "tests": tests}
        )
    assert [e["loc"] for e in both.value.errors()] == [("response",)]
    with pytest.raises(ValidationError, match="`code` or the policy's completion") as neither:
        CodeItem.model_validate({"id": "x", "language": "python", "tests": tests})
    assert [e["loc"] for e in neither.value.errors()] == [("code",)]


async def test_results_are_what_the_code_document_says(
    code_verifier: CodeVerifier, run_verifier: CodeRunVerifier
) -> None:
    scored = await code_verifier.score(
        [
            _item("print(int(input()) ** 2)"),
            _item("def f(:\n"),
            _item("int main() { return }", language="cpp"),
            CodeItem(id="r", language="python", response="no program here", tests=SQUARE),
            _item("x", {"kind": "assert", "entry_point": "f", "test": "def nope(c): pass"}),
        ]
    )
    assert [o.error is None for o in scored] == [True, True, True, True, False]
    for outcome in scored:
        text = result_json("x", outcome, verifier_info(code_verifier))
        assert_documented("code", "CodeItemResult", json.loads(text))
    [ran] = await run_verifier.score([RunItem(id="r", language="python", code="print(1)")])
    text = result_json("r", ran, verifier_info(run_verifier))
    assert_documented("code", "CodeRunItemResult", json.loads(text))
    state = {"job_id": "0" * 32, "verifier": "code", "status": "done", "total": 1}
    assert_documented("code", "JobState", {**state, "completed": 1, "results": [json.loads(text)]})


async def test_an_item_cancelled_while_its_slot_is_cleaned_leaves_the_cleanup_running(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An item cancelled while it waits for its slot's spare sandbox, which waits for the
    previous item's clean-up on that uid, cancels neither: the clean-up sweeps its uid, and
    the next item takes the spare and is scored."""
    verifier = CodeVerifier(CodeConfig(slots=1, default_timeout_s=3.0))
    await verifier.start()
    runner, pool = verifier._runner, verifier._pool
    assert runner is not None and pool is not None
    uids = list(pool.uids)
    gate = asyncio.Event()
    swept: list[int | None] = []
    cleanup = runner._cleanup

    async def held_cleanup(lease: Any) -> None:
        await gate.wait()
        await cleanup(lease)
        swept.append(lease.uid)

    monkeypatch.setattr(runner, "_cleanup", held_cleanup)
    try:
        # Two items: each slot uid once; both clean-ups held at the gate.
        for _ in range(2):
            [outcome] = await verifier.score([_item("print(int(input()) ** 2)")])
            assert outcome.reward == 1.0
        # The third waits for the spare on the first uid, which waits for that clean-up.
        third = asyncio.create_task(verifier.score([_item("print(int(input()) ** 2)")]))
        for _ in range(500):
            if 0 not in runner._spares:
                break
            await asyncio.sleep(0.01)
        assert 0 not in runner._spares, "the third item took the slot's spare"
        await asyncio.sleep(0.05)
        third.cancel()
        with pytest.raises(asyncio.CancelledError):
            await third
        assert 0 in runner._spares and swept == []
        gate.set()
        [outcome] = await verifier.score([_item("print(int(input()) ** 2)")])
        assert outcome.reward == 1.0
    finally:
        gate.set()
        await verifier.aclose()
    # Both held clean-ups ran (released together, in either order), each sweeping its uid.
    assert sorted(swept[:2]) == sorted(uids)
    await assert_no_processes(uids)
