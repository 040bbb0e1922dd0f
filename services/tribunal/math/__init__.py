"""Math verifier library: final-answer extraction and Math-Verify equivalence.

Pure, synchronous and CPU-bound: ``verify_answer`` is meant to run in a killable worker
process (``tribunal.core.pool``); it never sets a timeout of its own.

Names are imported on first use, so ``tribunal.wire.math`` (the wire models) imports
without sympy or Math-Verify.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tribunal.math.config import MathConfig
    from tribunal.math.extract import extract_answer
    from tribunal.math.verify import MathScore, verify_answer

_EXPORTS = {
    "MathConfig": "tribunal.math.config",
    "extract_answer": "tribunal.math.extract",
    "MathScore": "tribunal.math.verify",
    "verify_answer": "tribunal.math.verify",
}
"""Public name -> defining module, imported on first use (PEP 562)."""

__all__ = [
    "MathConfig",
    "MathScore",
    "extract_answer",
    "verify_answer",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
