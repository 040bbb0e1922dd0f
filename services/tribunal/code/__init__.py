"""The code runner: sandboxed execution of untrusted programs, scored against tests.

Public surface: the two verifiers, their configuration and settings, the item models and
the verdict enum. Names are imported on first use, so ``tribunal.code.schemas`` (the wire
models) imports with pydantic alone.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tribunal.code.config import CodeConfig
    from tribunal.code.schemas import (
        AssertTests,
        CodeDetails,
        CodeItem,
        CodeOptions,
        FunctionCase,
        FunctionTests,
        Limits,
        RunDetails,
        RunItem,
        StdioCase,
        StdioTests,
        TestDetail,
    )
    from tribunal.code.settings import CodeSettings
    from tribunal.code.verdicts import TestVerdict
    from tribunal.code.verifier import CodeRunVerifier, CodeVerifier

_EXPORTS = {
    "CodeConfig": "tribunal.code.config",
    "AssertTests": "tribunal.code.schemas",
    "CodeDetails": "tribunal.code.schemas",
    "CodeItem": "tribunal.code.schemas",
    "CodeOptions": "tribunal.code.schemas",
    "FunctionCase": "tribunal.code.schemas",
    "FunctionTests": "tribunal.code.schemas",
    "Limits": "tribunal.code.schemas",
    "RunDetails": "tribunal.code.schemas",
    "RunItem": "tribunal.code.schemas",
    "StdioCase": "tribunal.code.schemas",
    "StdioTests": "tribunal.code.schemas",
    "TestDetail": "tribunal.code.schemas",
    "CodeSettings": "tribunal.code.settings",
    "TestVerdict": "tribunal.code.verdicts",
    "CodeRunVerifier": "tribunal.code.verifier",
    "CodeVerifier": "tribunal.code.verifier",
}
"""Public name -> defining module, imported on first use (PEP 562)."""

__all__ = [
    "AssertTests",
    "CodeConfig",
    "CodeDetails",
    "CodeItem",
    "CodeOptions",
    "CodeRunVerifier",
    "CodeSettings",
    "CodeVerifier",
    "FunctionCase",
    "FunctionTests",
    "Limits",
    "RunDetails",
    "RunItem",
    "StdioCase",
    "StdioTests",
    "TestDetail",
    "TestVerdict",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
