"""Domain configuration of the math verifier: one frozen, hashable model, defaults here only.

Being frozen and made of scalars, :class:`MathConfig` can key caches and feeds
``tribunal.wire.hashing.config_hash`` through :meth:`MathConfig.as_dict`. The service's
settings (``tribunal.math.settings``) extend it with how the service runs it, so that every
field is also ``TRIBUNAL_MATH_<FIELD>``; per-item options (``tribunal.wire.math.MathOptions``)
override a few fields through :meth:`MathConfig.merged`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tribunal.wire.math import AnswerFormat, ChatTemplate


class MathConfig(BaseModel):
    """How answers are extracted and compared.

    Defaults are Math-Verify's own (``math_verify.verify`` in huggingface/Math-Verify 0.9.0),
    except for the Tribunal additions below them.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    float_rounding: int = Field(
        default=6,
        ge=0,
        le=15,
        description="Decimal places both sides are rounded to when one of them is a decimal "
        "(Math-Verify's float_rounding): with 6, \\frac{1}{3} equals 0.333333 but not 0.33.",
    )
    numeric_precision: int = Field(
        default=15,
        ge=1,
        le=100,
        description="Significant digits of Math-Verify's numeric check "
        "(a - b).evalf(n=...) == 0 (numeric_precision).",
    )
    strict: bool = Field(
        default=True,
        description="Math-Verify's strict: variable names matter and sets are not comparable "
        "with tuples. false matches variables by position (f(x) = x+1 equals y+1).",
    )
    allow_set_relation_comp: bool = Field(
        default=False,
        description="Math-Verify's allow_set_relation_comp: let a predicted relation "
        "(1 < x < 2) match a gold set ((1, 2)). The gold-relation / predicted-set direction is "
        "always on.",
    )
    allow_fast_path: bool = Field(
        default=True,
        description="Compare plain decimal numbers (18, -2.5, 1,000) without sympy. It gives "
        "Math-Verify's answer (tested in tests/math/test_verify.py) and falls back to it "
        "whenever rounding could matter; it is what makes GSM8K-shaped items cheap.",
    )
    allow_last_number: bool = Field(
        default=True,
        description="When a completion has no \\boxed{}, #### or 'The answer is', take its last "
        "bare number as the answer (GSM8K-style free text). false: such a completion has no "
        "answer and gets reward 0.",
    )
    exact_guard: bool = Field(
        default=True,
        description="Tribunal addition: when Math-Verify calls two exact constants equal (no "
        "decimals, no percent), check that their ratio is 1 to 20 significant digits. It "
        "rejects Math-Verify's known false positive 1/2004! = 1/2006! (issue #14: "
        "evalf(chop=True) rounds the tiny difference to 0).",
    )
    relative_tolerance: float = Field(
        default=1e-3,
        gt=0,
        le=1,
        description="Tribunal addition: a decimal answer to a nonzero gold must also be within "
        "this fraction of the gold's magnitude (|a - g| <= tol * |g|; the larger of this and "
        "10^-float_rounding). Math-Verify's rounding alone makes 0 equal every gold below "
        "5e-7; a gold 0 keeps that absolute floor.",
    )
    last_box_only: bool = Field(
        default=False,
        description="Strict mode: the answer is the completion's last \\boxed{} (adjacent "
        "boxes as one list); a completion without one gets reward 0, whatever its answer "
        "phrases, #### line or numbers say.",
    )
    answer_format: AnswerFormat = Field(
        default="lenient",
        description="Where the answer is: boxed (the last \\boxed{} of the final answer "
        "region), hash (its last '#### x' line), answer_line (its last 'Answer: x' line), or "
        "lenient (boxes, ####, answer phrases, the last math or number: not for training; "
        "the default of direct requests only, never of a spec). In the strict formats two "
        "distinct answers in the final region pay nothing.",
    )
    chat_template: ChatTemplate = Field(
        default="chatml",
        description="The policy's chat template: text after the first turn marker of this "
        "template (chatml <|im_end|>, llama3 <|eot_id|>, gemma <end_of_turn>) is a typed "
        "turn, never the answer; none: no turn markers. Other families' markers are text.",
    )
    max_answer_chars: int = Field(
        default=1_000,
        ge=1,
        description="An extracted answer longer than this is not parsed (sympy on a huge "
        "expression can run for minutes); the completion gets reward 0 with its extraction "
        "method. MATH-500 answers are at most 80 characters.",
    )

    def merged(
        self,
        *,
        float_rounding: int | None = None,
        strict: bool | None = None,
        last_box_only: bool | None = None,
        answer_format: AnswerFormat | None = None,
        chat_template: ChatTemplate | None = None,
    ) -> MathConfig:
        """Return a copy with the per-item overrides that are set (``None`` keeps a field).

        Raises:
            ValueError: An override is out of range (the item schema refuses those first).
        """
        changes: dict[str, Any] = {}
        if float_rounding is not None:
            changes["float_rounding"] = float_rounding
        if strict is not None:
            changes["strict"] = strict
        if last_box_only is not None:
            changes["last_box_only"] = last_box_only
        if answer_format is not None:
            changes["answer_format"] = answer_format
        if chat_template is not None:
            changes["chat_template"] = chat_template
        return MathConfig.model_validate({**self.as_dict(), **changes}) if changes else self

    def as_dict(self) -> dict[str, int | float | bool | str]:
        """Return the fields as a JSON-able dict (the input of the config hash)."""
        return {name: getattr(self, name) for name in MathConfig.model_fields}
