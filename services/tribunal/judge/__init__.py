"""The rubric judge: grade a long-form response against positive and negative rubrics.

Public surface: :class:`JudgeVerifier` (the ``Verifier`` the core runs), its
:class:`JudgeConfig` / :class:`JudgeSettings`, the item and details models, rubrics and
static sets, prompt building and the aggregation rule. Names are imported on first use, so
``tribunal.wire.judge`` (the wire models) imports with pydantic alone.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tribunal.judge.config import JudgeConfig
    from tribunal.judge.prompts import PROMPT_VERSION, build_prompt
    from tribunal.judge.scorer import aggregate
    from tribunal.judge.settings import JudgeSettings
    from tribunal.judge.verifier import JudgeVerifier
    from tribunal.wire.judge import JudgeDetails, JudgeItem, RubricResult, RubricVerdict
    from tribunal.wire.rubric_sets import available_rubric_sets, load_rubric_set
    from tribunal.wire.rubrics import Polarity, Rubric

_EXPORTS = {
    "JudgeConfig": "tribunal.judge.config",
    "PROMPT_VERSION": "tribunal.judge.prompts",
    "build_prompt": "tribunal.judge.prompts",
    "available_rubric_sets": "tribunal.wire.rubric_sets",
    "load_rubric_set": "tribunal.wire.rubric_sets",
    "Polarity": "tribunal.wire.rubrics",
    "Rubric": "tribunal.wire.rubrics",
    "JudgeDetails": "tribunal.wire.judge",
    "JudgeItem": "tribunal.wire.judge",
    "RubricResult": "tribunal.wire.judge",
    "RubricVerdict": "tribunal.wire.judge",
    "aggregate": "tribunal.judge.scorer",
    "JudgeSettings": "tribunal.judge.settings",
    "JudgeVerifier": "tribunal.judge.verifier",
}
"""Public name -> defining module, imported on first use (PEP 562)."""

__all__ = [
    "PROMPT_VERSION",
    "JudgeConfig",
    "JudgeDetails",
    "JudgeItem",
    "JudgeSettings",
    "JudgeVerifier",
    "Polarity",
    "Rubric",
    "RubricResult",
    "RubricVerdict",
    "aggregate",
    "available_rubric_sets",
    "build_prompt",
    "load_rubric_set",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
