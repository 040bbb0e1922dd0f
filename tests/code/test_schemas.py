"""schemas.py: items validate and name the field at fault."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tribunal.code import CodeItem, RunItem, sandbox_fusion
from tribunal.code.config import CodeConfig
from tribunal.code.runner import effective_limits
from tribunal.wire.code import Limits


def _errors(payload: dict[str, object]) -> list[tuple[object, ...]]:
    with pytest.raises(ValidationError) as info:
        CodeItem.model_validate(payload)
    return [tuple(e["loc"]) for e in info.value.errors()]


def test_tests_are_a_union_on_kind() -> None:
    item = CodeItem.model_validate(
        {
            "id": "a",
            "language": "Python3",
            "code": "",
            "tests": {"kind": "stdio", "cases": [{"stdout": "1"}]},
        }
    )
    assert item.language == "python" and item.tests.kind == "stdio"
    assert _errors({"id": "a", "language": "python", "code": "", "tests": {"kind": "nope"}}) == [
        ("tests",)
    ]


def test_unknown_language_and_missing_entry_point_name_their_field() -> None:
    base = {"id": "a", "code": "", "tests": {"kind": "stdio", "cases": [{"stdout": ""}]}}
    assert ("language",) in _errors({**base, "language": "cobol"})
    missing = {"kind": "function", "cases": [{"expected": 1}]}
    assert ("tests", "function", "entry_point") in _errors(
        {**base, "language": "python", "tests": missing}
    )
    bad = {"kind": "function", "entry_point": "os.system('x')", "cases": [{"expected": 1}]}
    assert ("tests", "function", "entry_point") in _errors(
        {**base, "language": "python", "tests": bad}
    )


def test_function_tests_need_python() -> None:
    tests = {"kind": "assert", "entry_point": "f", "test": "def check(c): pass"}
    with pytest.raises(ValidationError, match="needs language 'python'"):
        CodeItem.model_validate({"id": "a", "language": "cpp", "code": "", "tests": tests})


def test_limits_are_clamped_and_defaulted() -> None:
    config = CodeConfig(max_timeout_s=10, max_memory_mb=1024)
    clamped = effective_limits(Limits(timeout_s=99, memory_mb=99999), config)
    assert (clamped.timeout_s, clamped.memory_mb) == (10, 1024)
    assert effective_limits(None, config).max_output_bytes == config.default_max_output_bytes
    with pytest.raises(ValidationError):
        RunItem.model_validate(
            {"id": "r", "language": "python", "code": "", "limits": {"timeout_s": 0}}
        )


def test_code_or_response_errors_name_the_field_in_a_batch() -> None:
    # The request model the service validates with: a bad item becomes that item's bad_input.
    from tribunal.code import CodeVerifier
    from tribunal.core.request_models import InvalidItem, score_request_model

    tests = {"kind": "stdio", "cases": [{"stdout": "1"}]}
    request = score_request_model(CodeVerifier(CodeConfig())).model_validate(
        {
            "items": [
                {"id": "a", "language": "python", "code": "print(1)", "tests": tests},
                {"id": "b", "language": "python", "tests": tests},
                {"id": "c", "language": "python", "code": "1", "response": "1", "tests": tests},
            ]
        }
    )
    good, neither, both = request.items  # type: ignore[attr-defined]
    assert isinstance(good, CodeItem)
    assert isinstance(neither, InvalidItem) and isinstance(both, InvalidItem)
    missing, doubled = neither.bad_input(1), both.bad_input(2)
    assert (
        missing.field == "items.1.code" and "`code` or the policy's completion" in missing.message
    )
    assert doubled.field == "items.2.response" and "not both" in doubled.message


def test_the_run_code_docstring_says_the_default_compile_timeout() -> None:
    # It once said 10 s (SandboxFusion's default) where the service's default was 30 s.
    seconds = f"{CodeConfig().compile_timeout_s:g} s by default"
    assert seconds in (sandbox_fusion.__doc__ or "")
