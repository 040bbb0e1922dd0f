"""The code runner: sandboxed execution of untrusted programs, scored against tests.

Public surface: the two verifiers, their configuration and settings, the item models and
the verdict enum.
"""

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
