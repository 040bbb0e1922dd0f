"""A small safe arithmetic language for reward formulas, parsed with ``ast`` and never ``eval``.

A spec may combine its components with a formula such as ``10 * judge + 0.2 * citation``
or ``correct + (1 - correct) * min(-0.6, -1 + 0.05 * (num_turns - 2))``.
The grammar is exactly:

- numbers (int or float literals; no ``True`` / ``None`` / strings),
- names (each must be a component of the spec),
- ``+ - * /`` and ``**`` with a small constant exponent (|exponent| <= 8); a divisor is a
  nonzero constant expression, and a negative exponent has a constant base, so that no
  response can make a formula divide by zero (issue 36),
- unary ``-`` and ``+``,
- calls of ``min(a, b, ...)``, ``max(a, b, ...)``, ``clip(x, low, high)`` and ``abs(x)``.

Anything else (attribute access, subscripts, other calls, keyword arguments, lambdas,
comprehensions, comparisons, boolean operators, conditional expressions, f-strings, walrus,
starred arguments) is refused when the spec loads, with the position of the offending node.
The tree is compiled into a closure over plain floats, so evaluating it runs no Python code
from the spec. A formula longer than 2,000 characters or deeper than 32 levels is refused too.

Evaluation raises :class:`FormulaError` on division by zero, on a power that is not a real
number (``(-1) ** 0.5``), and on any non-finite intermediate value (an overflow that a later
``min`` would hide), and the caller treats a non-finite input as an error too: such an item
gets an error, never a reward.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

MAX_CHARS = 2000
MAX_DEPTH = 32
MAX_EXPONENT = 8

Evaluator = Callable[[Mapping[str, float]], float]


class FormulaError(ValueError):
    """A formula is not in the grammar (at load) or not defined for the values (at use)."""


def _clip(x: float, low: float, high: float) -> float:
    if low > high:
        raise FormulaError(f"clip: low {low:g} > high {high:g}")
    return min(max(x, low), high)


def _abs(x: float) -> float:
    return abs(x)


FUNCTIONS: dict[str, tuple[Callable[..., float], int, int | None]] = {
    "min": (min, 2, None),
    "max": (max, 2, None),
    "clip": (_clip, 3, 3),
    "abs": (_abs, 1, 1),
}
"""name -> (function, least arguments, most arguments or None)."""


def _div(a: float, b: float) -> float:
    if b == 0:
        raise FormulaError("division by zero")
    return a / b


def _finite(value: float, node: ast.AST) -> float:
    """Refuse a non-finite intermediate value: ``min(judge * 1e308 * 10, 1)`` must not
    quietly become 1."""
    if not math.isfinite(value):
        column = getattr(node, "col_offset", 0) + 1
        raise FormulaError(f"non-finite intermediate value {value} (column {column})")
    return value


def _pow(a: float, b: float) -> float:
    """``a ** b`` as a real number: a negative base to a fractional power is complex in
    Python (``(-1) ** 0.5``), which no reward can be."""
    try:
        result = a**b
    except (OverflowError, ZeroDivisionError) as exc:
        raise FormulaError(f"{a:g} ** {b:g}: {exc}") from None
    if not isinstance(result, int | float):
        raise FormulaError(f"{a:g} ** {b:g} is not a real number")
    return float(result)


_BINARY: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: _div,
    ast.Pow: _pow,
}


@dataclass(frozen=True)
class Formula:
    """A parsed formula.

    Attributes:
        source: The text as written in the spec.
        names: The component names it reads.
    """

    source: str
    names: frozenset[str]
    _evaluate: Evaluator

    def __call__(self, values: Mapping[str, float]) -> float:
        """Evaluate with ``values`` (one float per name in :attr:`names`).

        Raises:
            FormulaError: Division by zero, overflow, or ``clip`` with low > high.
            KeyError: A name has no value.
        """
        return self._evaluate(values)


def parse_formula(source: str, allowed_names: frozenset[str] | set[str]) -> Formula:
    """Parse ``source`` into a :class:`Formula` over ``allowed_names``.

    Raises:
        FormulaError: The text is too long, does not parse, or uses anything outside the
            grammar of this module (the message names the construct and its column).

    Examples:
        >>> f = parse_formula("10 * judge + 0.2 * citation", {"judge", "citation"})
        >>> f({"judge": 0.5, "citation": 1.0})
        5.2
    """
    if len(source) > MAX_CHARS:
        raise FormulaError(f"formula longer than {MAX_CHARS} characters")
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError as exc:
        raise FormulaError(f"formula does not parse: {exc.msg} (column {exc.offset})") from None
    names: set[str] = set()
    evaluate = _compile(tree.body, frozenset(allowed_names), names, 0)
    return Formula(source=source, names=frozenset(names), _evaluate=evaluate)


def _refuse(node: ast.AST, what: str) -> FormulaError:
    column = getattr(node, "col_offset", None)
    where = f" (column {column + 1})" if column is not None else ""
    return FormulaError(f"{what} is not allowed in a formula{where}")


def _compile(node: ast.AST, allowed: frozenset[str], names: set[str], depth: int) -> Evaluator:
    if depth > MAX_DEPTH:
        raise FormulaError(f"formula nested deeper than {MAX_DEPTH} levels")
    if isinstance(node, ast.Constant):
        return _compile_constant(node)
    if isinstance(node, ast.Name):
        return _compile_name(node, allowed, names)
    if isinstance(node, ast.UnaryOp):
        if not isinstance(node.op, ast.USub | ast.UAdd):
            raise _refuse(node, type(node.op).__name__)
        operand = _compile(node.operand, allowed, names, depth + 1)
        if isinstance(node.op, ast.USub):
            return lambda v: -operand(v)
        return operand
    if isinstance(node, ast.BinOp):
        return _compile_binary(node, allowed, names, depth)
    if isinstance(node, ast.Call):
        return _compile_call(node, allowed, names, depth)
    raise _refuse(node, type(node).__name__)


def _compile_constant(node: ast.Constant) -> Evaluator:
    value = node.value
    # bool is an int subclass: refuse it explicitly.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _refuse(node, f"the constant {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise _refuse(node, f"the non-finite constant {value!r}")
    return lambda v: number


def _compile_name(node: ast.Name, allowed: frozenset[str], names: set[str]) -> Evaluator:
    if node.id not in allowed:
        choices = ", ".join(sorted(allowed)) or "none"
        raise FormulaError(f"unknown name {node.id!r} in formula; components: {choices}")
    names.add(node.id)
    key = node.id
    return lambda v: v[key]


def _compile_binary(
    node: ast.BinOp, allowed: frozenset[str], names: set[str], depth: int
) -> Evaluator:
    op = _BINARY.get(type(node.op))
    if op is None:
        raise _refuse(node, f"the operator {type(node.op).__name__}")
    if isinstance(node.op, ast.Pow):
        exponent = node.right
        sign = 1.0
        if isinstance(exponent, ast.UnaryOp) and isinstance(exponent.op, ast.USub):
            exponent, sign = exponent.operand, -1.0
        if not (
            isinstance(exponent, ast.Constant)
            and isinstance(exponent.value, int | float)
            and not isinstance(exponent.value, bool)
            and abs(exponent.value) <= MAX_EXPONENT
        ):
            raise _refuse(node, f"an exponent other than a constant of at most {MAX_EXPONENT}")
        power = sign * float(exponent.value)
        base_names: set[str] = set()
        base = _compile(node.left, allowed, base_names, depth + 1)
        if power < 0 and base_names:
            raise _refuse(node, "a negative power of a component (it can divide by zero)")
        names |= base_names
        return lambda v: _finite(_pow(base(v), power), node)
    left = _compile(node.left, allowed, names, depth + 1)
    right_names: set[str] = set()
    right = _compile(node.right, allowed, right_names, depth + 1)
    if isinstance(node.op, ast.Div):
        if right_names:
            raise _refuse(node, "a division by a component (a response could make it zero)")
        if right({}) == 0:
            raise _refuse(node, "a division by zero")
    names |= right_names
    return lambda v: _finite(op(left(v), right(v)), node)


def _compile_call(
    node: ast.Call, allowed: frozenset[str], names: set[str], depth: int
) -> Evaluator:
    if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
        what = node.func.id if isinstance(node.func, ast.Name) else type(node.func).__name__
        raise _refuse(node, f"calling {what!r} (only {', '.join(FUNCTIONS)})")
    if node.keywords:
        raise _refuse(node, "a keyword argument")
    if any(isinstance(arg, ast.Starred) for arg in node.args):
        raise _refuse(node, "a starred argument")
    function, least, most = FUNCTIONS[node.func.id]
    if len(node.args) < least or (most is not None and len(node.args) > most):
        expected = str(least) if most == least else f"at least {least}"
        raise FormulaError(f"{node.func.id}() takes {expected} arguments, got {len(node.args)}")
    args = [_compile(arg, allowed, names, depth + 1) for arg in node.args]
    return lambda v: float(function(*(a(v) for a in args)))
