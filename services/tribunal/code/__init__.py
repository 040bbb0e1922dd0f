"""The code runner: sandboxed execution of untrusted programs, scored against tests.

Public surface: the two verifiers, their configuration and settings, the item models and
the verdict enum. Names are imported on first use, so ``tribunal.wire.code`` (the wire
models) imports with pydantic alone.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tribunal.code.config import CodeConfig
    from tribunal.code.settings import CodeSettings
    from tribunal.code.verifier import CodeRunVerifier, CodeVerifier
    from tribunal.wire.code import (
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
    from tribunal.wire.code_verdicts import TestVerdict

_EXPORTS = {
    "CodeConfig": "tribunal.code.config",
    "AssertTests": "tribunal.wire.code",
    "CodeDetails": "tribunal.wire.code",
    "CodeItem": "tribunal.wire.code",
    "CodeOptions": "tribunal.wire.code",
    "FunctionCase": "tribunal.wire.code",
    "FunctionTests": "tribunal.wire.code",
    "Limits": "tribunal.wire.code",
    "RunDetails": "tribunal.wire.code",
    "RunItem": "tribunal.wire.code",
    "StdioCase": "tribunal.wire.code",
    "StdioTests": "tribunal.wire.code",
    "TestDetail": "tribunal.wire.code",
    "CodeSettings": "tribunal.code.settings",
    "TestVerdict": "tribunal.wire.code_verdicts",
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
