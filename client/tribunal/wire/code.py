"""Item and details models of ``POST /v1/code/score`` and ``POST /v1/code/run``."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from tribunal.wire.code_verdicts import TestVerdict
from tribunal.wire.envelope import ScoreItem

Language = Literal["python", "cpp"]

_LANGUAGE_ALIASES = {"python3": "python", "py": "python", "c++": "cpp", "cxx": "cpp"}

ENTRY_POINT_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*(\(\))?(\.[A-Za-z_][A-Za-z0-9_]*(\(\))?)*$"
"""A name, or a dotted path whose parts may be called without arguments: ``add``,
``Solution().twoSum``."""

MAX_CODE_CHARS = 1 << 20
MAX_CASES = 10_000


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _normalise_language(value: Any) -> Any:
    if isinstance(value, str):
        lowered = value.strip().lower()
        return _LANGUAGE_ALIASES.get(lowered, lowered)
    return value


class Limits(_Model):
    """Per-test-case limits; each is clamped to the server's maximum, unset means default."""

    # Strict numbers: `true` is not a timeout of 1 s (pydantic's lax mode reads bools as 1/0).
    timeout_s: StrictFloat | None = Field(
        default=None, gt=0, description="Wall-clock limit per case."
    )
    memory_mb: StrictInt | None = Field(
        default=None, gt=0, description="Address space per process, MiB."
    )
    max_output_bytes: StrictInt | None = Field(
        default=None, gt=0, description="Cap on stdout and on stderr per case, bytes."
    )


class StdioCase(_Model):
    """One stdin/stdout case."""

    stdin: str = Field(default="", description="Bytes fed to the program (UTF-8).")
    stdout: str = Field(description="Expected output, compared after normalisation.")


class StdioTests(_Model):
    """Run the program once per case on ``stdin``; compare normalised stdout."""

    kind: Literal["stdio"]
    cases: list[StdioCase] = Field(min_length=1, max_length=MAX_CASES)


class FunctionCase(_Model):
    """One call of the entry point and its expected JSON return value."""

    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    expected: Any = Field(description="Expected return value; compared type-strictly.")


class FunctionTests(_Model):
    """LeetCode style: call ``entry_point`` per case and compare its return value."""

    kind: Literal["function"]
    entry_point: str = Field(
        pattern=ENTRY_POINT_PATTERN, max_length=256, description="`add` or `Solution().twoSum`."
    )
    cases: list[FunctionCase] = Field(min_length=1, max_length=MAX_CASES)


class AssertTests(_Model):
    """HumanEval / MBPP style: ``test`` defines ``check(candidate)``; one case. Only the entry
    point is taken from the program: the test defines or imports every other name it uses
    (a prompt's helpers too, which the program could redefine to see the expected values)."""

    kind: Literal["assert"]
    entry_point: str = Field(pattern=ENTRY_POINT_PATTERN, max_length=256)
    test: str = Field(
        min_length=1,
        max_length=MAX_CODE_CHARS,
        description="Defines `check(candidate)`, and the prompt's helpers it calls; a name "
        "it neither defines nor imports (but the entry point's) is `bad_input`.",
    )


Tests = Annotated[StdioTests | FunctionTests | AssertTests, Field(discriminator="kind")]


class CodeOptions(_Model):
    """Scoring options of one item."""

    all_or_nothing: bool = Field(default=False, description="Reward 1 only if every case passes.")
    stop_on_first_failure: bool = Field(
        default=False,
        description="Stop at the first failing case in the order run (a random order drawn "
        "for each item); the cases not run are `skipped`.",
    )
    float_tolerance: StrictFloat | None = Field(
        default=None,
        ge=0,
        description="Absolute and relative tolerance for floats (stdout tokens, return values).",
    )


class CodeItem(ScoreItem):
    """One program to score against tests: give the program as ``code``, or the policy's whole
    completion as ``response`` (the program is then its last fenced block of ``language``,
    see ``tribunal.code.extract``)."""

    language: Language = Field(description="`python` (Python 3) or `cpp` (g++, C++17).")
    code: str | None = Field(
        default=None,
        max_length=MAX_CODE_CHARS,
        description="The program (untrusted). Exactly one of `code` and `response`.",
    )
    response: str | None = Field(
        default=None,
        max_length=MAX_CODE_CHARS,
        description=(
            "The policy's whole completion; the program is its last fenced block of `language` "
            "(```python / ```py / ```cpp / ```c++, else the last unlabelled ``` block), "
            "returned in details.extracted_code. No such block: reward 0, reason in "
            "details.no_code_reason. Exactly one of `code` and `response`."
        ),
    )
    tests: Tests
    limits: Limits | None = None
    options: CodeOptions = Field(default_factory=CodeOptions)

    _norm_language = field_validator("language", mode="before")(_normalise_language)

    @model_validator(mode="after")
    def _code_or_response(self) -> CodeItem:
        if self.code is not None and self.response is not None:
            _raise_at(
                "response", "give the program as `code` or the completion as `response`, not both"
            )
        if self.code is None and self.response is None:
            _raise_at("code", "give the program as `code` or the policy's completion as `response`")
        return self

    @model_validator(mode="after")
    def _function_tests_need_python(self) -> CodeItem:
        if self.language != "python" and self.tests.kind != "stdio":
            raise ValueError(
                f"tests.kind {self.tests.kind!r} needs language 'python'; "
                f"use stdio tests for {self.language!r}"
            )
        return self


def _raise_at(field: str, message: str) -> None:
    """Fail validation at ``field`` (a model validator's own errors name no field)."""
    error = PydanticCustomError("code_or_response", message)
    raise ValidationError.from_exception_data(
        "CodeItem", [InitErrorDetails(type=error, loc=(field,), input=None)]
    )


class RunItem(ScoreItem):
    """One program to run once (the code-interpreter tool)."""

    language: Language
    code: str = Field(max_length=MAX_CODE_CHARS)
    stdin: str = Field(default="", description="Bytes fed to the program (UTF-8).")
    limits: Limits | None = None

    _norm_language = field_validator("language", mode="before")(_normalise_language)


class TestDetail(BaseModel):
    """The verdict of one case."""

    __test__ = False

    index: int
    verdict: TestVerdict
    time_ms: float | None = Field(default=None, description="Wall-clock time of the case.")
    message: str | None = Field(default=None, description="Why it failed (capped).")
    stdout: str | None = Field(
        default=None,
        description="A failed stdin/stdout case: the start of what the program printed "
        "(256 characters at most); absent when it passed or printed nothing.",
    )
    stderr: str | None = Field(
        default=None,
        description="A failed stdin/stdout case: the start of its stderr (256 characters at "
        "most); absent when it passed or wrote nothing.",
    )


class CodeDetails(BaseModel):
    """``details`` of a scored item."""

    tests: list[TestDetail]
    passed: int
    total: int
    all_passed: bool
    compile_message: str | None = None
    isolation: str | None = Field(default=None, description="Set only when not sandboxed.")
    extracted_code: str | None = Field(
        default=None, description="The program taken from `response` (items that sent one)."
    )
    no_code_reason: str | None = Field(
        default=None,
        description="Why `response` held no program (then reward 0 and no test ran).",
    )


class RunDetails(BaseModel):
    """``details`` of a run: what the program printed and how it ended."""

    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    exit_code: int | None = Field(
        default=None, description="Exit status; 128+N after death by signal N; null if none."
    )
    verdict: TestVerdict = Field(description="`accepted` means exit status 0 within limits.")
    time_ms: float | None = Field(default=None, description="Wall-clock time of the run.")
    isolation: str | None = None
