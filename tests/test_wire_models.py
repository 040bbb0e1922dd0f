"""The wire models import with pydantic alone: no server, queue, HTTP or model dependency.

Each check runs in a fresh interpreter, since this test process has long since imported
everything.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

WIRE_MODULES = (
    "tribunal.wire.envelope",
    "tribunal.wire.math",
    "tribunal.wire.code",
    "tribunal.wire.judge",
    "tribunal.wire.citation",
    "tribunal.wire.gateway",
)
FORBIDDEN = (
    "fastapi",
    "starlette",
    "uvicorn",
    "redis",
    "aiohttp",
    "torch",
    "transformers",
    "sympy",
    "math_verify",
    "pydantic_settings",
    "prometheus_client",
    "pebble",
    "yaml",
)

_PROBE = """
import json, sys
import {module}
print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))
"""


@pytest.mark.parametrize("module", WIRE_MODULES)
def test_wire_module_loads_no_server_dependency(module: str) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE.format(module=module)],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    ).stdout
    loaded = set(json.loads(out))
    assert "pydantic" in loaded
    assert not loaded & set(FORBIDDEN), f"{module} loads {sorted(loaded & set(FORBIDDEN))}"


def test_items_validate_in_a_light_process() -> None:
    code = """
import sys
from tribunal.wire.code import CodeItem
from tribunal.wire.envelope import ItemResult, JobState
from tribunal.wire.judge import JudgeItem
from tribunal.wire.math import MathDetails, MathItem

MathItem(id="a", response="#### 18", ground_truth="18")
CodeItem.model_validate({"id": "c", "code": "print(1)", "language": "python",
                         "tests": {"kind": "stdio", "cases": [{"stdin": "", "stdout": "1"}]}})
JudgeItem(id="j", question="q", response="r", rubrics=[{"text": "is short"}])
MathDetails(extracted_answer="18", extracted_ground_truth="18", method="gsm8k_hash")
ItemResult.model_validate({"id": "a", "reward": None,
                           "error": {"code": "timeout", "message": "m", "retryable": True},
                           "verifier": {"name": "math", "version": "1", "config_hash": "x"}})
assert "sympy" not in sys.modules and "aiohttp" not in sys.modules
"""
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_package_public_names_still_resolve() -> None:
    from tribunal import code, judge, math

    assert math.MathScore.__name__ == "MathScore"
    assert code.CodeVerifier.__name__ == "CodeVerifier"
    assert judge.JudgeVerifier.__name__ == "JudgeVerifier"
    with pytest.raises(AttributeError):
        _ = math.not_a_name
