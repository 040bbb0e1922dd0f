"""Grade a completion against a ground truth: extraction, then Math-Verify equivalence.

:func:`verify_answer` extracts the completion's final answer (``tribunal.math.extract``),
then compares it with the ground truth: plain decimal numbers directly (the fast path), any
other answer through Math-Verify (``math_verify.parse`` / ``math_verify.verify``,
huggingface/Math-Verify 0.9.0). Both sides are given to ``parse`` as ``\\boxed{<answer>}``,
so what is compared is exactly what was extracted, never a number that Math-Verify's own
regexes pick out of the surrounding prose (its PR #82: ``1-1/e`` read as ``1+1/e``).

Math-Verify's own timeouts are always off (``parsing_timeout=None``,
``timeout_seconds=None``): they use SIGALRM, which breaks off the main thread (issues #50,
#55) and gave wrong answers inside FastAPI (issue #11). The caller runs this function in a
worker process that is killed on a hard deadline (``tribunal.core.pool``), so that no input
can hang the service. ``raise_on_error=True`` is always passed, and errors are classified
(Math-Verify's ``verify`` otherwise answers ``False`` both for "not equal" and for "could
not compare", issue #62):

- a ground truth that Math-Verify cannot turn into a sympy value (only its string
  fallback, or nothing) is the input's fault: ``BadInput``;
- a completion without an extractable answer is the completion's fault: reward 0, method
  ``none``; so is an answer longer than ``MathConfig.max_answer_chars``;
- a comparison that raises inside sympy is Tribunal's (or sympy's) limitation, not a wrong
  answer: ``InternalError`` (reward ``None`` for that item, never a silent 0).

Decisions that follow Math-Verify (each one is a test in ``tests/math/test_verify.py``):
``50\\%`` equals ``0.5`` *and* ``50`` (a percent equals its fraction, and an integer percent
equals the bare integer: Math-Verify's ``sympy_numeric_eq``); ``10 \\text{ cm}`` equals
``10`` (unit words are dropped); ``x = 3`` equals ``3`` (an assignment is unwrapped when
the other side is a bare value); ``1,000`` equals ``1000`` (a comma before three digits
is a thousands separator) while ``1,2`` is the set ``{1, 2}``; ``\\frac{1}{3}`` equals
``0.333333`` but not ``0.33`` (``float_rounding=6``). The comparison is not symmetric:
the ground truth goes first, as Math-Verify's ``verify(gold, target)`` requires.

Decisions of Tribunal's own (issue 8; tested there and in ``tests/math/
test_math_verify_cases.py``): a decimal comma is read by context (:func:`_readings`: an
answer ``1,2`` is also ``1.2``; a ground truth ``-2,1`` stays a list); ``\\mathrm{e}`` is
``e`` (Math-Verify's unit stripping otherwise cuts it off); two unequalities
(``x \\neq 3``) are compared as their equations, and an unequality never equals anything
else; a ground truth that is a worked solution is extracted as a completion would be; an
answer joined from several boxes or spans, or a list whose items carry units, is the set
of its items, each parsed on its own (a hedge never equals one of its items).

Decisions of issue 28 (``tests/math/test_red_team.py``, ``docs/math.md``): an answer that
is negated, hedged, bounded, multiple-valued, retracted, or a box holding words that are
neither the gold's nor a unit gets 0 before any comparison (``tribunal.math.commit``; the
reason is ``MathScore.uncommitted``); and a decimal answer to a nonzero gold must also be
within :func:`relative_tolerance` of it, where Math-Verify's rounding to ``float_rounding``
decimals alone made ``0`` equal every gold below ``5e-7``.

Known issues:
    - ``\\sqrt{1/n}`` vs ``\\frac{1}{\\sqrt n}`` is rejected (Math-Verify issue #64: sympy
      does not assume ``n > 0``).
    - A completion's answer Math-Verify cannot turn into sympy is compared as a normalized
      string (Math-Verify's fallback); it can only match a ground truth that also failed to
      parse, which is refused as ``BadInput``, so in practice it gets reward 0.
    - A number followed by plain words (``18 dollars``) is compared as the number, so
      ``5 apples`` equals ``5 oranges``; ``\\text{}`` units go through Math-Verify's own
      unit handling.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from itertools import product
from typing import Any

import sympy
from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

from tribunal.math.commit import uncommitted, uncommitted_in_sentence
from tribunal.math.config import MathConfig
from tribunal.math.extract import (
    Extraction,
    clean_answer,
    extract_answer,
    last_boxed,
)
from tribunal.math.grammar import Graded, grade_region
from tribunal.math.normalize import normalize_text
from tribunal.wire.errors import BadInput, InternalError
from tribunal.wire.math import MathDetails, Reason, RegionName, ScoreMethod

logger = logging.getLogger(__name__)


def _not_timeout_disabled(record: logging.LogRecord) -> bool:
    # Math-Verify warns once per process that its SIGALRM timeouts are off: they are off on
    # purpose here (the pool kills a process past its deadline), so the warning is noise.
    return not str(record.msg).startswith("Timeout is disabled")


for _name in ("math_verify.parser", "math_verify.grader"):
    logging.getLogger(_name).addFilter(_not_timeout_disabled)

_EXTRACTION_CONFIG = (LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig())
_PLAIN_NUMBER = re.compile(r"[+-]?(?:[1-9]\d{0,2}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][+-]?\d+)?")
# Programming e-notation (``1e-07``, ``2.5E3``): a number, never a product with Euler's e.
_E_NOTATION = re.compile(r"(?<![\w.\\])(\d+(?:\.\d+)?)[eE]([+-]?\d{1,4})(?![\w.])")
_CURRENCY = re.compile(r"^(?:\\\$|\$)\s*(?=[-+]?\d)")
# A currency sign after a number (``2,74 $``, ``1,000.99€``).
_TRAILING_CURRENCY = re.compile(r"(?<=\d)\s*(?:\\\$|\$|€|£)$")
# "18 dollars", "$5 per hour": a number followed by plain words (3+ letters first, so that
# "2 x" or "3 pi" stay expressions). Math-Verify reads the words as a product of symbols.
_NUMBER_THEN_WORDS = re.compile(
    r"((?:\\\$|\$)?[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)[ \t]+[A-Za-z]{3}[A-Za-z \t]*"
)
# A unit or word in text mode, which Math-Verify's unit stripping cuts off with what follows.
_UNIT_COMMAND = re.compile(r"\\(?:text|textbf|textnormal|mbox|mathrm)\s*\{")
# Two plain words in a row ("the total"), not preceded by a backslash.
_PROSE_WORDS = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}[ \t]+[A-Za-z]{3,}")
# ``$``, ``\\(`` or ``\\[`` left inside a ground truth once its outer ``$...$`` is stripped.
_INNER_DELIMITER = re.compile(r"(?<!\\)\$|\\\(|\\\[")
# A constant written upright (``\\mathrm{e}``, ``\\text{e}``, ``\\mathrm{\\pi}``): Math-Verify's
# unit stripping would cut ``\\text{e}`` at the end of an answer as if it were a unit.
_UPRIGHT_CONSTANT = re.compile(r"\\(?:mathrm|text|rm|operatorname)\s*\{\s*(e|\\pi)\s*\}")
# One number with spaces or thin spaces between thousands groups: ``1 000``, ``1\\,000``.
_SPACED_THOUSANDS = re.compile(r"[+-]?\d{1,3}(?:(?:\\[,;!]|\{,\}|\\ |[ \t])\s*\d{3})+(?:\.\d+)?")
# One number whose comma cannot separate thousands (``2,74``, ``1000,99``, ``0,111``): it
# may be a decimal comma. The list reading (``1,22`` = {1, 22}) is kept beside it.
_DECIMAL_COMMA = re.compile(r"([+-]?\d+)(?:,|\{,\})(\d+)")
_PARSE_CACHE_SIZE = 1024
# 20 significant digits: far below the 30 digits evaluated, far above any real tie.
_EXACT_RTOL = sympy.Float(10, 30) ** -20


@dataclass(frozen=True)
class MathScore:
    """The outcome of one completion.

    Attributes:
        reward: 1.0 if the answer equals the ground truth, else 0.0 (range ``{0.0, 1.0}``).
        extracted_answer: The completion's answer as extracted, or None (method ``none``).
        extracted_ground_truth: The ground truth as compared (``\\boxed{}`` and ``$``
            stripped).
        method: How the answer was found (``boxed``, ``fbox``, ``gsm8k_hash``,
            ``answer_phrase``, ``last_math``, ``whole_response``, ``final_equation``,
            ``last_number``), or ``none``.
        uncommitted: Why the answer is no committed answer (``negated``, ``bounded``,
            ``hedged``, ``multiple``, ``words``, ``retracted``: ``tribunal.math.commit``;
            ``multiple`` also for two distinct answers of a strict format in the final
            region), in which case the reward is 0; None otherwise.
        region: Where the final answer region starts (``response``,
            ``after_reasoning``), or None when there is none (``<think>`` never closed).
    """

    reward: float
    extracted_answer: str | None
    extracted_ground_truth: str
    method: ScoreMethod
    uncommitted: Reason | None = None
    region: RegionName | None = field(default=None, compare=False)

    def details(self) -> MathDetails:
        """The wire model of what was compared, returned with the result."""
        return MathDetails(
            extracted_answer=self.extracted_answer,
            extracted_ground_truth=self.extracted_ground_truth,
            method=self.method,
            uncommitted=self.uncommitted,
            region=self.region,
        )


def verify_answer(response: str, ground_truth: str, config: MathConfig | None = None) -> MathScore:
    """Score ``response`` against ``ground_truth``: 1.0 if its final answer is equivalent.

    CPU-bound and without a deadline of its own: run it in a killable worker process.

    Args:
        response: The completion (any length; extraction is linear time).
        ground_truth: The reference answer (``18``, ``1,000``, ``\\frac{1}{2}``, ``$x=3$``,
            or a text whose last ``\\boxed{}`` holds it).
        config: Extraction and comparison settings; ``MathConfig()`` when None.

    Returns:
        The reward and what was compared.

    Raises:
        BadInput: ``ground_truth`` is empty or Math-Verify cannot parse it into a sympy
            value (``field="ground_truth"``): an item error, reward None.
        InternalError: The comparison itself raised inside sympy (an item error).

    Examples:
        >>> verify_answer("so the total is \\\\boxed{\\\\dfrac{1}{2}}", "0.5").reward
        1.0
        >>> verify_answer("She has 1,000 left.\\n#### 1000", "1,000").method
        'gsm8k_hash'
    """
    config = config or MathConfig()
    truth, truth_parts = _ground_truth_text(ground_truth)
    truth_number = _plain_number(truth) if config.allow_fast_path else None
    gold = None if truth_number is not None else _parse_gold(truth, truth_parts)

    graded = _extract(response, config)
    extraction, region = graded.extraction, graded.region
    if extraction is None:
        return MathScore(0.0, None, truth, "none", region=region)
    answer, method = extraction.text, extraction.method
    if len(answer) > config.max_answer_chars:
        cut = answer[: config.max_answer_chars] + "…"
        return MathScore(0.0, cut, truth, method, region=region)
    reason = _uncommitted(graded, truth, config)
    if reason is not None:
        return MathScore(0.0, answer, truth, method, reason, region)
    compared = _without_trailing_words(answer)

    if truth_number is not None:
        answer_number = _plain_number(compared)
        if answer_number is not None:
            same = _numbers_equal(truth_number, answer_number, config)
            if same is not None:
                return MathScore(float(same), answer, truth, method, region=region)
        gold = _parse_gold(truth, truth_parts)
    assert gold is not None  # parsed above unless the fast path could answer
    same = _equivalent(gold, _parse_answer(compared, extraction.parts), config)
    return MathScore(1.0 if same else 0.0, answer, truth, method, region=region)


def verify_plain_numbers(
    response: str, ground_truth: str, config: MathConfig | None = None
) -> MathScore | None:
    """Score ``response`` as :func:`verify_answer` would, when that needs no sympy.

    The decision is :func:`verify_answer`'s own whenever this returns a score: the ground
    truth and the extracted answer are both plain decimal numbers that the fast path can
    compare (``MathConfig.allow_fast_path``), or the completion has no answer. It costs tens
    of microseconds (GSM8K-shaped items), so a caller may run it in-process and send only
    the rest to a killable worker process; extraction is linear in ``len(response)``.

    Returns:
        The score, or None when only the full comparison can decide.

    Raises:
        BadInput: ``ground_truth`` is empty.
    """
    config = config or MathConfig()
    if not config.allow_fast_path:
        return None
    truth, _ = _ground_truth_text(ground_truth)
    truth_number = _plain_number(truth)
    if truth_number is None:
        return None
    graded = _extract(response, config)
    extraction, region = graded.extraction, graded.region
    if extraction is None:
        return MathScore(0.0, None, truth, "none", region=region)
    answer = extraction.text
    if len(answer) > config.max_answer_chars:
        return None
    reason = _uncommitted(graded, truth, config)
    if reason is not None:
        return MathScore(0.0, answer, truth, extraction.method, reason, region)
    answer_number = _plain_number(_without_trailing_words(answer))
    if answer_number is None:
        return None
    same = _numbers_equal(truth_number, answer_number, config)
    if same is None:
        return None
    return MathScore(float(same), answer, truth, extraction.method, region=region)


def _extract(response: str, config: MathConfig) -> Graded:
    """The answer the config's declared format names in the normalised final region."""
    return grade_region(
        normalize_text(response),
        config.answer_format,
        template=config.chat_template,
        allow_last_number=config.allow_last_number,
        last_box=config.last_box_only,
    )


def _uncommitted(graded: Graded, truth: str, config: MathConfig) -> Reason | None:
    """Why the graded answer is not a committed one (``tribunal.math.commit``), or None."""
    extraction = graded.extraction
    assert extraction is not None
    if graded.candidates:
        return "multiple"
    if config.answer_format != "lenient":
        return uncommitted_in_sentence(
            extraction.text,
            lead=extraction.before,
            tail=extraction.after,
            gold=truth,
            boxed=True,
        )
    return uncommitted(
        extraction.text,
        before=extraction.before,
        after=extraction.after,
        statement=extraction.statement,
        gold=truth,
        boxed=extraction.method in ("boxed", "fbox"),
    )


def _without_trailing_words(answer: str) -> str:
    """``18 dollars`` -> ``18``: a number followed by words is compared as the number."""
    with_words = _NUMBER_THEN_WORDS.fullmatch(answer)
    return with_words.group(1) if with_words is not None else answer


def _ground_truth_text(ground_truth: str) -> tuple[str, tuple[str, ...]]:
    """Return the answer inside ``ground_truth``.

    Its last ``\\boxed{}`` (several adjacent boxes as one list), else the text itself with
    ``$`` stripped; a worked solution (see :func:`_is_worked_solution`) has its answer
    extracted as a completion's would be.

    Returns:
        The answer text, and its parts when it was joined from several boxes or spans.
    """
    found = last_boxed(ground_truth)
    if found is None and _is_worked_solution(clean_answer(ground_truth)):
        found = extract_answer(ground_truth)
    elif found is None:
        found = Extraction(clean_answer(ground_truth), "whole_response")
    if found is None or not found.text:
        raise BadInput("ground_truth is empty", field="ground_truth")
    return found.text, found.parts


def _is_worked_solution(text: str) -> bool:
    """Whether a ground truth is a solution rather than an answer: math delimiters inside,
    a ``####`` line, or several lines of prose (a multi-line matrix is an answer)."""
    return bool(
        _INNER_DELIMITER.search(text)
        or "####" in text
        or ("\n" in text and _PROSE_WORDS.search(text))
    )


def _plain_number(text: str) -> Decimal | None:
    """Return ``text`` as a Decimal if it is a plain decimal number (``-1,234.5``)."""
    text = _CURRENCY.sub("", text)
    if len(text) > 100 or _PLAIN_NUMBER.fullmatch(text) is None:
        return None
    return Decimal(text.replace(",", ""))


def _numbers_equal(gold: Decimal, answer: Decimal, config: MathConfig) -> bool | None:
    """Compare two plain numbers as Math-Verify would, or None when that needs sympy.

    Math-Verify compares two integers exactly and otherwise rounds both to
    ``float_rounding`` decimals (``sympy_numeric_eq``). Equal values are equal under any
    rounding; values further apart than two rounding steps, and than the relative precision
    of a sympy Float, are different under any rounding. Near-ties go to Math-Verify. A
    nonzero gold is also held to :func:`relative_tolerance` (never more lenient than
    Math-Verify): ``0`` is not ``0.0000003``.
    """
    if gold == answer:
        return True
    if gold.as_tuple().exponent == 0 and answer.as_tuple().exponent == 0:
        return False  # two integers: Math-Verify compares sympy Integers exactly
    difference = abs(gold - answer)
    if gold != 0 and difference > abs(gold) * Decimal(repr(relative_tolerance(config))):
        return False
    step = Decimal(10) ** -config.float_rounding
    relative = max(abs(gold), abs(answer)) * Decimal("1e-12")
    if difference > 2 * step and difference > relative:
        return False
    return None


@lru_cache(maxsize=_PARSE_CACHE_SIZE)
def _parse_gold(truth: str, parts: tuple[str, ...] = ()) -> tuple[Any, ...]:
    """Parse a ground truth with Math-Verify; cached (a group shares its ground truth).

    ``parts``: the answers a joined ground truth is made of (:func:`_parse_joined`).

    Raises:
        BadInput: Math-Verify finds nothing in it, or raises on it.
    """
    try:
        parts = parts or _unit_list_parts(truth)
        parsed = _parse_joined(parts, True) if parts else _parse(truth, is_ground_truth=True)
    except Exception as exc:  # Math-Verify and sympy raise anything
        raise BadInput(
            f"ground_truth could not be parsed: {type(exc).__name__}: {exc}",
            field="ground_truth",
        ) from exc
    if not any(isinstance(value, sympy.Basic | sympy.MatrixBase) for value in parsed):
        # Nothing, or only Math-Verify's string fallback: latex2sympy could not read it.
        raise BadInput(
            f"ground_truth has no parseable math answer: {truth[:200]!r}", field="ground_truth"
        )
    return _defined(parsed)


@lru_cache(maxsize=_PARSE_CACHE_SIZE)
def _parse_answer(answer: str, parts: tuple[str, ...] = ()) -> tuple[Any, ...]:
    """Parse a completion's answer; an error is the completion's fault (empty: reward 0)."""
    try:
        parts = parts or _unit_list_parts(answer)
        return _defined(_parse_joined(parts, False) if parts else _parse(answer))
    except Exception:  # Math-Verify and sympy raise anything on arbitrary model text
        logger.debug("answer could not be parsed: %.200r", answer, exc_info=True)
        return ()


def _unit_list_parts(text: str) -> tuple[str, ...]:
    """Split a list whose items carry units (``5.4 \\text{ cents}, 6.4 \\text{ cents}``) into
    its items, or return ``()``.

    Math-Verify's unit stripping keeps what comes before the first unit and drops the rest,
    so such a list would read as its first item and equal it. The list is split at its
    top-level commas (not inside brackets or braces, not between digits as in ``1,000``).
    """
    if _UNIT_COMMAND.search(text) is None:
        return ()
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        depth += (char in "([{") - (char in ")]}")
        if char == "," and depth == 0:
            between_digits = (
                text[index - 1 : index].isdigit() and text[index + 1 : index + 2].isdigit()
            )
            if not between_digits:
                parts.append(text[start:index].strip())
                start = index + 1
    parts.append(text[start:].strip())
    return tuple(parts) if len(parts) > 1 and all(parts) else ()


def _parse_joined(parts: tuple[str, ...], is_ground_truth: bool) -> tuple[Any, ...]:
    """Parse an answer joined from several boxes or spans as the set of its parts.

    Each part is parsed on its own, as Math-Verify does for boxes it joins (``extract_latex``
    in its ``parser.py``): parsing the joined text would let its unit stripping keep only
    the first part (``\\boxed{5.4 \\text{ cents}} or \\boxed{6.4 \\text{ cents}}`` read as
    ``5.4``). A part that does not parse makes the whole answer unparsed.

    Returns:
        ``(FiniteSet of the parts' values, the joined text)``, or ``()``.
    """
    values: list[Any] = []
    for part in parts:
        parsed = [
            v
            for v in _defined(_parse(part, is_ground_truth=is_ground_truth))
            if isinstance(v, sympy.Basic)
        ]
        if not parsed:
            return ()
        values.extend(parsed[0].args if isinstance(parsed[0], sympy.FiniteSet) else parsed[:1])
    return (sympy.FiniteSet(*values), ", ".join(parts))


def _parse(text: str, *, is_ground_truth: bool = False) -> tuple[Any, ...]:
    """Parse ``text`` with Math-Verify, after reading the number forms it misreads.

    Each reading of ``text`` (see :func:`_readings`) is given to Math-Verify's ``parse`` as
    ``\\boxed{reading}``, timeouts off and errors raised; the candidates of all readings
    are returned, the literal reading first.
    """
    parsed: list[Any] = []
    text = _TRAILING_CURRENCY.sub("", _CURRENCY.sub("", text))
    for reading in _readings(text, is_ground_truth=is_ground_truth):
        parsed.extend(
            parse(
                "\\boxed{" + reading + "}",
                extraction_config=_EXTRACTION_CONFIG,
                parsing_timeout=None,  # the caller's process has a deadline
                raise_on_error=True,
            )
        )
    return tuple(parsed)


def _readings(text: str, *, is_ground_truth: bool) -> list[str]:
    """Return the ways ``text`` can be read: itself, and a decimal one for a comma.

    ``\\mathrm{e}`` becomes ``e`` (and ``\\mathrm{\\pi}`` ``\\pi``); one number with spaced
    thousands groups (``1 000``, ``1\\,000``) loses its spaces. One number with a comma that
    cannot separate thousands (not three digits after it, or an integer part 0) is also read
    with a decimal point: an answer ``2,74``, ``2,5`` or ``0,111`` equals both the decimal and
    the list (``\\{2, 5\\}``), whichever the ground truth is. A ground truth gets the decimal
    reading only with two digits after the comma (``1,22``), or more after a 0 (``0,111``):
    ``-2,1`` (a MATH-500 answer) stays the list ``\\{-2, 1\\}``, which ``-2.1`` does not
    equal. ``1,000`` stays one thousand.
    """
    text = _UPRIGHT_CONSTANT.sub(r"\1", text).strip()
    text = _E_NOTATION.sub(lambda m: f"{m[1]} \\times 10^{{{int(m[2])}}}", text)
    if _SPACED_THOUSANDS.fullmatch(text):
        return [re.sub(r"\\[,;! ]|\{,\}|\s", "", text)]
    comma = _DECIMAL_COMMA.fullmatch(text)
    if comma is None:
        return [text]
    whole, fraction = comma.groups()
    is_zero = whole.lstrip("+-") == "0"
    if len(fraction) == 3 and not is_zero:
        return [text]  # thousands
    if is_ground_truth and not (len(fraction) == 2 or (is_zero and len(fraction) > 2)):
        return [text]
    return [text, f"{whole}.{fraction}"]


def _defined(values: tuple[Any, ...]) -> tuple[Any, ...]:
    """Drop sympy values that contain ``zoo`` or ``nan``, keeping the string form.

    ``12:00`` parses to ``12/0 = zoo``: comparing two such values raised inside sympy, so
    times are compared as strings instead (``12:00`` vs ``1:00``, Math-Verify issue #14).
    """
    return tuple(
        value
        for value in values
        if not (
            isinstance(value, sympy.Basic | sympy.MatrixBase) and value.has(sympy.zoo, sympy.nan)
        )
    )


def _equivalent(gold: tuple[Any, ...], answer: tuple[Any, ...], config: MathConfig) -> bool:
    """Whether any gold candidate equals any answer candidate (Math-Verify's ``verify``).

    Each pair is compared on its own so that an error in one pair is seen (Math-Verify
    would log it at debug level and answer ``False``) and does not hide a later match.

    Raises:
        InternalError: No pair matched and at least one comparison raised.
    """
    failure: Exception | None = None
    for gold_value, answer_value in product(gold, answer):
        if _is_unequality(gold_value) != _is_unequality(answer_value):
            continue  # ``x \\neq 3`` is no value, equation or inequality but itself
        try:
            same = verify(
                _as_equation(gold_value),
                _as_equation(answer_value),
                float_rounding=config.float_rounding,
                numeric_precision=config.numeric_precision,
                strict=config.strict,
                allow_set_relation_comp=config.allow_set_relation_comp,
                timeout_seconds=None,
                raise_on_error=True,
            )
        except Exception as exc:  # sympy raises anything (ValueError, TypeError, ...)
            failure = exc
            continue
        if same and _leaves_agree(gold_value, answer_value, config):
            return True
    if failure is not None:
        raise InternalError(
            f"Math-Verify could not compare the answer with the ground truth: "
            f"{type(failure).__name__}: {failure}"
        ) from failure
    return False


def _leaves_agree(gold: Any, answer: Any, config: MathConfig) -> bool:
    """Apply the numeric rule to every number of two values Math-Verify called equal.

    Math-Verify rounds each number it compares to ``float_rounding`` decimals and chops
    tiny differences of exact ones, inside equations, sets, tuples, intervals and matrices
    as for bare numbers. Here the two values are walked in step (:func:`_leaves`): ``x = v``
    is ``v``; a set's numbers are paired in increasing order, a tuple's, an interval's and
    a matrix's by position; and each pair of numbers must pass the exact-value guard
    (:func:`_exact_values_agree`) and the relative tolerance (:func:`_within_tolerance`).
    Values whose shapes differ keep Math-Verify's verdict.
    """
    gold_leaves, answer_leaves = _leaves(gold), _leaves(answer)
    if len(gold_leaves) != len(answer_leaves):
        return True
    rtol = relative_tolerance(config)
    return all(
        (not config.exact_guard or _exact_values_agree(g, a)) and _within_tolerance(g, a, rtol)
        for g, a in zip(gold_leaves, answer_leaves, strict=True)
    )


_MAX_LEAVES = 256


def _leaves(value: Any) -> list[Any]:
    """The numbers of ``value`` in a canonical order, or ``[value]`` for anything else.

    ``Eq(x, v)`` (a symbol on the left) is ``v``'s; a ``FiniteSet``'s are its elements'
    (``x = v`` read as ``v``) sorted by value when each is one real number (else the set is
    one leaf); a tuple's, a list's, an ``Interval``'s
    (its two ends) and a matrix's (row by row) are positional. At most 256 (a larger value
    is one leaf, itself).
    """
    if isinstance(value, sympy.Eq) and isinstance(value.lhs, sympy.Symbol):
        return _leaves(value.rhs)
    elements: list[Any] | None = None
    if isinstance(value, sympy.FiniteSet) and len(value.args) <= _MAX_LEAVES:
        nested = [_leaves(element) for element in value.args]
        if all(len(one) == 1 and _is_real_number(one[0]) for one in nested):
            return sorted((one[0] for one in nested), key=lambda e: float(e.evalf(30)))
        return [value]
    if isinstance(value, sympy.Interval):
        elements = [value.start, value.end]
    elif isinstance(value, sympy.Tuple | tuple | list | sympy.MatrixBase):
        elements = list(value)
    if elements is None or len(elements) > _MAX_LEAVES:
        return [value]
    leaves: list[Any] = []
    for element in elements:
        leaves.extend(_leaves(element))
    return leaves


def _is_real_number(value: Any) -> bool:
    return isinstance(value, sympy.Expr) and bool(value.is_number) and bool(value.is_real)


def _is_unequality(value: Any) -> bool:
    return isinstance(value, sympy.Ne)


def _as_equation(value: Any) -> Any:
    """Return ``a = b`` for ``a \\neq b``: two unequalities are the same relation when their
    equations are (Math-Verify's relation comparison raises ``KeyError`` on ``Ne``)."""
    return sympy.Eq(*value.args, evaluate=False) if _is_unequality(value) else value


def _exact_values_agree(gold: Any, answer: Any) -> bool:
    """Check that two exact constants Math-Verify called equal agree to 20 digits.

    Math-Verify's numeric test ``(a - b).evalf(chop=True) == 0`` chops any difference below
    its precision, so ``1/2004!`` equals ``1/2006!`` (issue #14). For constants without
    decimals or percentages (where rounding is intended), compare the values relatively.
    Anything this check cannot evaluate keeps Math-Verify's verdict.
    """
    if not (isinstance(gold, sympy.Expr) and isinstance(answer, sympy.Expr)) or gold == answer:
        return True
    for value in (gold, answer):
        if not value.is_number or value.has(sympy.Float, sympy.UnevaluatedExpr):
            return True
    try:
        gold_value = gold.evalf(30)
        answer_value = answer.evalf(30)
        scale = max(abs(gold_value), abs(answer_value))
        if scale == 0:
            return True
        return bool(abs(gold_value - answer_value) <= scale * _EXACT_RTOL)
    except (TypeError, ValueError, ArithmeticError):
        return True


def relative_tolerance(config: MathConfig) -> float:
    """The relative tolerance a nonzero gold holds a decimal answer to.

    ``max(config.relative_tolerance, 10 ** -config.float_rounding)``: with the defaults
    (``1e-3``, 6) it binds only where ``|gold| < 1e-3``, Math-Verify's decimal rounding being
    the stricter rule above; a coarser ``float_rounding`` loosens it with it.
    """
    return max(config.relative_tolerance, 10.0**-config.float_rounding)


def _within_tolerance(gold: Any, answer: Any, rtol: float) -> bool:
    """Whether a decimal comparison agrees relatively: ``|a - g| <= rtol * |g|`` for g != 0.

    Math-Verify rounds both sides to ``float_rounding`` decimals, so any answer below
    ``5e-7`` equals any gold below it (``0`` equals ``3 \\times 10^{-7}``). Only numbers of
    which one side is a decimal (a sympy ``Float``) are checked; a gold 0 keeps Math-Verify's
    absolute floor. Anything this check cannot evaluate keeps Math-Verify's verdict.
    """
    if not (isinstance(gold, sympy.Expr) and isinstance(answer, sympy.Expr)):
        return True
    if not (gold.is_number and answer.is_number) or not (
        gold.has(sympy.Float) or answer.has(sympy.Float)
    ):
        return True
    try:
        gold_value = complex(gold.evalf(30))
        answer_value = complex(answer.evalf(30))
    except (TypeError, ValueError, ArithmeticError):
        return True
    if gold_value == 0:
        return True
    return abs(answer_value - gold_value) <= rtol * abs(gold_value)
