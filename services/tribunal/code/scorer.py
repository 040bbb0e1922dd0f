"""The scoring rule: per-case verdicts -> reward and details.

``reward`` is the pass rate in [0, 1] (accepted cases / all cases; skipped cases count as
failed), or with ``all_or_nothing`` 1.0 when every case is accepted and 0.0 otherwise. An item
with any ``sandbox_error`` case has no reward: Tribunal failed, not the program.
"""

from __future__ import annotations

from tribunal.code.runner import CaseResult
from tribunal.wire.code import CodeDetails, TestDetail
from tribunal.wire.code_verdicts import TestVerdict


def pass_rate(cases: list[CaseResult]) -> float:
    """Share of accepted cases, in [0, 1] (0.0 for no cases)."""
    if not cases:
        return 0.0
    return sum(case.verdict is TestVerdict.ACCEPTED for case in cases) / len(cases)


def score_cases(
    cases: list[CaseResult],
    all_or_nothing: bool = False,
    compile_message: str | None = None,
    isolation: str | None = None,
) -> tuple[float, CodeDetails]:
    """Turn case verdicts into the item's reward and details.

    Args:
        cases: One result per test case, in order.
        all_or_nothing: Reward 1.0 only when every case passed, else 0.0.
        compile_message: The compiler's message for compile errors.
        isolation: Set when the program ran without a sandbox (development only).

    Returns:
        ``(reward, details)`` with reward in [0, 1].
    """
    passed = sum(case.verdict is TestVerdict.ACCEPTED for case in cases)
    all_passed = bool(cases) and passed == len(cases)
    reward = (1.0 if all_passed else 0.0) if all_or_nothing else pass_rate(cases)
    details = CodeDetails(
        tests=[
            TestDetail(
                index=k,
                verdict=case.verdict,
                time_ms=case.time_ms,
                message=case.message,
                stdout=case.stdout,
                stderr=case.stderr,
            )
            for k, case in enumerate(cases)
        ],
        passed=passed,
        total=len(cases),
        all_passed=all_passed,
        compile_message=compile_message,
        isolation=isolation,
    )
    return reward, details
