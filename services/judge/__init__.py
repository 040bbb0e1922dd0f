"""The rubric judge: grade a long-form response against positive and negative rubrics.

Public surface: :class:`JudgeVerifier` (the ``Verifier`` the core runs), its
:class:`JudgeConfig` / :class:`JudgeSettings`, the item and details models, rubrics and
static sets, prompt building and the aggregation rule.
"""

from tribunal.judge.config import JudgeConfig
from tribunal.judge.prompts import PROMPT_VERSION, build_prompt
from tribunal.judge.rubric_sets import available_rubric_sets, load_rubric_set
from tribunal.judge.rubrics import Polarity, Rubric
from tribunal.judge.schemas import JudgeDetails, JudgeItem, RubricResult, RubricVerdict
from tribunal.judge.scorer import aggregate
from tribunal.judge.settings import JudgeSettings
from tribunal.judge.verifier import JudgeVerifier

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
