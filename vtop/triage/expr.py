"""Safe expressions for thresholds, values and recommendation formulas.

Rules say `0.95 * max_num_seqs` or `min(ceil_to(demand_p95, 8), kv_fit)`; these run in
`simpleeval` (>= 1.0.5: earlier releases had a sandbox escape), chosen over a hand-written
evaluator because a well-kept library that many projects audit beats new code that nobody
else reads. It is locked down further than its defaults, in two layers:

1. At load time every expression is parsed and walked: only numbers, strings, booleans, names,
   arithmetic, comparisons, `and`/`or`/`not`, `x if c else y` and calls of whitelisted
   functions by name are accepted, and every name must be one the context defines. A rule file
   that breaks this fails `vtop rules check` with file, line and rule id, never at 3 a.m.
2. At run time the evaluator's node table holds only those node types (no attributes, no
   subscripts, no f-strings, no comprehensions), its functions are the whitelist below, and its
   names are plain numbers, strings and booleans.

Unknown is `None`, as everywhere in vtop: arithmetic on an unknown gives an unknown, `min` and
`max` skip unknowns, and `known(x, fallback)` says what to use when evidence runs out.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import simpleeval

Value = float | int | str | bool | None


def _known(*xs: Value) -> list[float]:
    return [float(x) for x in xs if isinstance(x, (int, float)) and not isinstance(x, bool)]


def _min(*xs: Value) -> float | None:
    vals = _known(*xs)
    return min(vals) if vals else None


def _max(*xs: Value) -> float | None:
    vals = _known(*xs)
    return max(vals) if vals else None


def _clamp(x: float, lo: float, hi: float) -> float:
    return max(lo, min(hi, x))


def _floor_to(x: float, step: float) -> float:
    return math.floor(x / step) * step


def _ceil_to(x: float, step: float) -> float:
    return math.ceil(x / step) * step


def _pow2_floor(x: float) -> float:
    return float(2 ** math.floor(math.log2(x))) if x >= 1 else 1.0


def _pow2_ceil(x: float) -> float:
    return float(2 ** math.ceil(math.log2(x))) if x > 1 else 1.0


def _pow2_round(x: float) -> float:
    return float(2 ** round(math.log2(x))) if x > 1 else 1.0


def _known_or(x: Value, fallback: Value) -> Value:
    return fallback if x is None else x


FUNCTIONS: dict[str, Callable[..., Value]] = {
    "min": _min,
    "max": _max,
    "round": round,
    "ceil": math.ceil,
    "floor": math.floor,
    "abs": abs,
    "clamp": _clamp,
    "floor_to": _floor_to,
    "ceil_to": _ceil_to,
    "pow2_floor": _pow2_floor,
    "pow2_ceil": _pow2_ceil,
    "pow2_round": _pow2_round,
    "known": _known_or,
}
"""Every function an expression may call. `min`/`max` skip unknown arguments."""

_NODES = (
    ast.Expression, ast.Expr, ast.Name, ast.Load, ast.Constant, ast.UnaryOp, ast.BinOp,
    ast.BoolOp, ast.Compare, ast.IfExp, ast.Call,
    ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.USub, ast.UAdd, ast.Not,
    ast.And, ast.Or, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE,
)  # fmt: skip

_ALLOWED_OPERATORS = (
    ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.USub, ast.UAdd, ast.Not,
    ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE,
)  # fmt: skip
_OPERATORS = {k: v for k, v in simpleeval.DEFAULT_OPERATORS.items() if k in _ALLOWED_OPERATORS}


class ExprError(ValueError):
    """An expression a rule may not use; the message says why in one line."""


@dataclass(frozen=True, slots=True)
class Expr:
    """A parsed, checked expression. `names` are the context names it reads."""

    text: str
    tree: ast.AST = field(repr=False, compare=False)
    names: frozenset[str]

    def eval(self, names: Mapping[str, Value]) -> Value:
        """The value over `names`; None when an input is unknown or the maths is undefined."""
        if self.names.difference(names):
            return None
        ev = _evaluator()
        ev.names = names
        try:
            out = ev.eval(self.text, previously_parsed=self.tree)
        except (TypeError, ValueError, ZeroDivisionError, OverflowError, ArithmeticError):
            return None
        if isinstance(out, float) and not math.isfinite(out):
            return None
        if out is None or isinstance(out, (bool, int, float, str)):
            return out
        return None

    def number(self, names: Mapping[str, Value]) -> float | None:
        """The value as a float, or None (booleans and strings are not numbers here)."""
        out = self.eval(names)
        if isinstance(out, bool) or not isinstance(out, (int, float)):
            return None
        return float(out)


_EVALUATOR: list[simpleeval.SimpleEval] = []


def _evaluator() -> simpleeval.SimpleEval:
    if not _EVALUATOR:
        ev = simpleeval.SimpleEval(operators=dict(_OPERATORS), functions=dict(FUNCTIONS),
                                   names={}, allowed_attrs={})  # fmt: skip
        ev.nodes = {k: v for k, v in ev.nodes.items() if k in _NODES}
        _EVALUATOR.append(ev)
    return _EVALUATOR[0]


def compile_expr(text: str, allowed: Callable[[str], bool]) -> Expr:
    """Parse and check `text`; `allowed(name)` says whether the context defines a name."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"cannot parse expression {text!r}: {exc.msg}") from None
    names: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, _NODES):
            raise ExprError(f"{type(node).__name__} is not allowed in expression {text!r}")
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
                fname = node.func.id if isinstance(node.func, ast.Name) else "?"
                raise ExprError(
                    f"unknown function {fname!r} in {text!r} (allowed: {', '.join(FUNCTIONS)})"
                )
            if node.keywords:
                raise ExprError(f"keyword arguments are not allowed in {text!r}")
        elif isinstance(node, ast.Name) and node.id not in FUNCTIONS:
            if not allowed(node.id):
                raise ExprError(f"unknown name {node.id!r} in {text!r}")
            names.add(node.id)
        elif isinstance(node, ast.Constant) and not isinstance(node.value, (int, float, str, bool)):
            raise ExprError(f"constant {node.value!r} is not allowed in {text!r}")
    # simpleeval evaluates an `Expr` statement node; keep that form for previously_parsed.
    body = ast.parse(text.strip()).body
    return Expr(text.strip(), body[0], frozenset(names))
