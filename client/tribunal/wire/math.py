"""Pydantic models of the math verifier's payload: the item, its options, its details."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from tribunal.wire.envelope import ScoreItem

AnswerFormat = Literal["boxed", "hash", "answer_line", "marked", "lenient"]
"""The declared answer format of a spec or a direct math request."""

ChatTemplate = Literal["chatml", "llama3", "gemma", "none"]
"""The policy's chat template: its markers end the policy's own turn."""

RegionName = Literal["response", "after_reasoning"]
"""Where the final answer region starts: the whole response, or after its last ``</think>``."""

ExtractionMethod = Literal[
    "boxed",
    "fbox",
    "gsm8k_hash",
    "answer_line",
    "answer_phrase",
    "last_math",
    "whole_response",
    "final_equation",
    "last_number",
]
"""Where the final answer was found."""

ScoreMethod = ExtractionMethod | Literal["none"]
"""A result's ``method``: where the answer was found, or ``none`` (no answer)."""

Reason = Literal["negated", "bounded", "hedged", "multiple", "words", "retracted"]
"""Why an answer is not a committed one."""


class MathOptions(BaseModel):
    """Per-item overrides of the service's ``MathConfig`` (unset fields keep the service's)."""

    model_config = ConfigDict(extra="forbid")

    float_rounding: StrictInt | None = Field(
        default=None,
        ge=0,
        le=15,
        description="Decimal places both sides are rounded to when one is a decimal "
        "(Math-Verify's float_rounding; service default 6).",
    )
    strict: bool | None = Field(
        default=None,
        description="Variable names matter and sets differ from tuples (Math-Verify's "
        "strict; service default true).",
    )
    last_box_only: bool | None = Field(
        default=None,
        description="Strict extraction: the answer is the last \\boxed{}; a completion "
        "without one gets reward 0 (service default false).",
    )
    answer_format: AnswerFormat | None = Field(
        default=None,
        description="The declared answer format: boxed, hash ('#### x'), answer_line "
        "('Answer: x') or lenient (not for training; service default lenient). Any other "
        "value is refused.",
    )
    chat_template: ChatTemplate | None = Field(
        default=None,
        description="The policy's chat template (chatml, llama3, gemma, none): text after its "
        "first turn marker is never the answer (service default chatml).",
    )


class MathItem(ScoreItem):
    """One completion to grade against a reference answer."""

    response: str = Field(
        description="The completion; its final answer is its last \\boxed{} (adjacent boxes "
        "as one list), a GSM8K '#### N' line, 'The answer is ...', its last $...$ / \\(...\\) "
        "/ \\[...\\] math, the whole of a one-line answer, the right-hand side of a final "
        "'x = ...', or its last number."
    )
    ground_truth: str = Field(
        min_length=1,
        max_length=10_000,
        description="The reference answer: '18', '1,000', '\\frac{1}{2}', '$x=3$', or a "
        "text whose last \\boxed{} holds it.",
    )
    options: MathOptions | None = Field(default=None, description="Per-item overrides.")


class MathDetails(BaseModel):
    """What was compared, returned with every math result for debugging."""

    extracted_answer: str | None = Field(
        description="The completion's final answer as extracted; null when none was found."
    )
    extracted_ground_truth: str = Field(description="The ground truth as compared.")
    method: ScoreMethod = Field(
        description="How the answer was found: boxed, fbox, gsm8k_hash, answer_line, "
        "answer_phrase, "
        "last_math, whole_response, final_equation, last_number, or none."
    )

    uncommitted: Reason | None = Field(
        default=None,
        description="Why the answer counts as no answer (reward 0): negated, bounded, "
        "hedged, multiple, words (a box holding words that are neither the gold's nor a "
        "unit) or retracted; null for a committed answer.",
    )

    region: RegionName | None = Field(
        default=None,
        description="Where the final answer region the answer was looked for in starts: "
        "response (the whole response, less code, comments, quotes, hypothetical sentences "
        "and typed turns) or after_reasoning (after the last </think>); null when there is "
        "none (a <think> never closed).",
    )
