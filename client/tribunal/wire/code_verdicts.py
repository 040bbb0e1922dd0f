"""The verdict of one test case (and of one ``/v1/code/run`` execution)."""

from __future__ import annotations

from enum import StrEnum


class TestVerdict(StrEnum):
    """Categorical outcome of one test case.

    ``accepted`` is the only passing verdict. ``skipped`` marks cases not run after an earlier
    failure under ``stop_on_first_failure``; they count as failed in the pass rate.
    ``sandbox_error`` is Tribunal's fault, never the program's: an item with such a case is
    answered with a ``sandbox_error`` error instead of a reward.
    """

    __test__ = False  # not a pytest class

    ACCEPTED = "accepted"
    WRONG_ANSWER = "wrong_answer"
    TIME_LIMIT = "time_limit"
    MEMORY_LIMIT = "memory_limit"
    RUNTIME_ERROR = "runtime_error"
    COMPILE_ERROR = "compile_error"
    SANDBOX_ERROR = "sandbox_error"
    SKIPPED = "skipped"
