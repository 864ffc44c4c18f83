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

What an expression may cost is bounded too (`vtop.triage.cost`): at load its length, its
nodes and depth, its constants, and every part without names is evaluated once, so
`round(1, -999999999)` fails `rules check`; arithmetic takes numbers only (text is compared,
never built: no `'a' * 10**9`, no `'%0999999999d' % 1`), integers past 2**63 become floats, and
`round` takes at most 20 digits either way. What only the data can decide (digits read from a
knob) raises `CostError` at evaluation, which the engine turns into that rule's one line.

Unknown is `None`, as everywhere in vtop: arithmetic on an unknown gives an unknown, `min` and
`max` skip unknowns, and `known(x, fallback)` says what to use when evidence runs out.
"""

from __future__ import annotations

import ast
import math
import operator
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import simpleeval

from vtop.triage import cost

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


def _sized(x: float) -> float:
    """A result kept machine-sized: an integer past `cost.MAX_INT` becomes a float (which may
    overflow, and the expression is then unknown)."""
    if isinstance(x, int) and not isinstance(x, bool) and not -cost.MAX_INT <= x <= cost.MAX_INT:
        return float(x)
    return x


def _number(x: object) -> float:
    """An operand of arithmetic: a number (a boolean counts as 0 or 1, as in Python); text or
    an unknown is a TypeError, which makes the expression unknown."""
    if isinstance(x, int | float):
        return x
    raise TypeError(f"arithmetic on {type(x).__name__}")


def _arith(op: Callable[[Any, Any], Any]) -> Callable[[object, object], float]:
    def apply(a: object, b: object) -> float:
        return _sized(op(_number(a), _number(b)))

    return apply


def _negate(a: object) -> float:
    return _sized(-_number(a))


def _plus(a: object) -> float:
    return _number(a)


def _round(x: object, ndigits: object = None) -> float:
    """`round`, with at most `cost.MAX_ROUND_DIGITS` digits either way: `round(1, -n)`
    computes 10**n, so `round(1, -999999999)` would never return."""
    if ndigits is None:
        return _sized(round(_number(x)))
    if isinstance(ndigits, bool) or not isinstance(ndigits, int):
        raise TypeError("round takes a whole number of digits")
    if abs(ndigits) > cost.MAX_ROUND_DIGITS:
        raise cost.CostError(
            f"round(…, {ndigits}): at most {cost.MAX_ROUND_DIGITS} digits either way"
        )
    return _sized(round(_number(x), ndigits))


def _whole(fn: Callable[[float], int]) -> Callable[[object], float]:
    def apply(x: object) -> float:
        return _sized(fn(_number(x)))

    return apply


def _abs(x: object) -> float:
    return _sized(abs(_number(x)))


FUNCTIONS: dict[str, Callable[..., Value]] = {
    "min": _min,
    "max": _max,
    "round": _round,
    "ceil": _whole(math.ceil),
    "floor": _whole(math.floor),
    "abs": _abs,
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
    ast.Expression,
    ast.Expr,
    ast.Name,
    ast.Load,
    ast.Constant,
    ast.UnaryOp,
    ast.BinOp,
    ast.BoolOp,
    ast.Compare,
    ast.IfExp,
    ast.Call,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.Div,
    ast.FloorDiv,
    ast.Mod,
    ast.USub,
    ast.UAdd,
    ast.Not,
    ast.And,
    ast.Or,
    ast.Eq,
    ast.NotEq,
    ast.Lt,
    ast.LtE,
    ast.Gt,
    ast.GtE,
)

_OPERATORS: dict[type, Callable[..., Any]] = {
    ast.Add: _arith(operator.add),
    ast.Sub: _arith(operator.sub),
    ast.Mult: _arith(operator.mul),
    ast.Div: _arith(operator.truediv),
    ast.FloorDiv: _arith(operator.floordiv),
    ast.Mod: _arith(operator.mod),
    ast.USub: _negate,
    ast.UAdd: _plus,
    ast.Not: operator.not_,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
"""Arithmetic on numbers only, every result machine-sized (`_sized`); comparisons as Python's."""


class ExprError(ValueError):
    """An expression a rule may not use; the message says why in one line."""


@dataclass(frozen=True, slots=True)
class Expr:
    """A parsed, checked expression. `names` are the context names it reads."""

    text: str
    tree: ast.AST = field(repr=False, compare=False)
    names: frozenset[str]

    def eval(self, names: Mapping[str, Value]) -> Value:
        """The value over `names`; None when an input is unknown or the maths is undefined.
        Raises `cost.CostError` when the inputs ask for more than the cost model allows."""
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


class _Bounded(simpleeval.SimpleEval):  # type: ignore[misc]
    """simpleeval, counting the nodes one evaluation visits and how deep it is: past
    `cost.MAX_EXPR_NODES` or `cost.MAX_EXPR_DEPTH` it stops with `CostError` (a checked
    expression never gets there; the count holds whatever tree it is handed)."""

    def __init__(self) -> None:
        super().__init__(
            operators=dict(_OPERATORS), functions=dict(FUNCTIONS), names={}, allowed_attrs={}
        )
        self.nodes: dict[type, Any] = {k: v for k, v in self.nodes.items() if k in _NODES}
        self.visited = 0
        self.depth = 0

    def eval(self, expr: str, previously_parsed: ast.AST | None = None) -> Any:
        self.visited = self.depth = 0
        return super().eval(expr, previously_parsed)

    def _eval(self, node: ast.AST) -> Any:
        self.visited += 1
        if self.visited > cost.MAX_EXPR_NODES:
            raise cost.CostError(f"an evaluation visits at most {cost.MAX_EXPR_NODES} nodes")
        if self.depth >= cost.MAX_EXPR_DEPTH + 2:  # the Expr statement and its body
            raise cost.CostError(f"expressions nest at most {cost.MAX_EXPR_DEPTH} deep")
        self.depth += 1
        try:
            return super()._eval(node)
        finally:
            self.depth -= 1


_LOCAL = threading.local()


def _evaluator() -> simpleeval.SimpleEval:
    """This thread's evaluator (its `names` and counters are per evaluation: the screens run
    the twin, and its advice, off their own thread)."""
    ev: _Bounded | None = getattr(_LOCAL, "evaluator", None)
    if ev is None:
        ev = _LOCAL.evaluator = _Bounded()
    return ev


def _depth(tree: ast.AST) -> int:
    """The depth of a syntax tree, without recursion (a tree too deep for the evaluator's stack
    must still be measured)."""
    deepest = 0
    todo = [(tree, 1)]
    while todo:
        node, d = todo.pop()
        deepest = max(deepest, d)
        todo.extend((child, d + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _check_cost(tree: ast.expr, text: str) -> None:
    """The cost model's load-time part: size, depth, constants, text arithmetic, and every
    part without names evaluated once (`round(1, -999999999)` fails here, not at 3 a.m.)."""
    nodes = list(ast.walk(tree))
    if len(nodes) > cost.MAX_EXPR_NODES:
        raise ExprError(
            f"expression has {len(nodes)} nodes, at most {cost.MAX_EXPR_NODES}: {cost.quote(text)}"
        )
    depth = _depth(tree)
    if depth > cost.MAX_EXPR_DEPTH:
        raise ExprError(
            f"expression nests {depth} deep, at most {cost.MAX_EXPR_DEPTH}: {cost.quote(text)}"
        )
    for node in nodes:
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, str) and len(v) > cost.MAX_TEXT_CHARS:
                raise ExprError(
                    f"text constant of {len(v)} characters, at most {cost.MAX_TEXT_CHARS}"
                )
            if isinstance(v, int) and not isinstance(v, bool) and abs(v) > cost.MAX_INT:
                raise ExprError(
                    f"constant {cost.quote(v)} is too large (at most 2**63; write a float)"
                )
        elif isinstance(node, ast.BinOp | ast.UnaryOp):
            operands = [node.left, node.right] if isinstance(node, ast.BinOp) else [node.operand]
            if any(isinstance(o, ast.Constant) and isinstance(o.value, str) for o in operands):
                raise ExprError(
                    f"arithmetic on text is not allowed in {cost.quote(text)} "
                    "(text is compared, never computed)"
                )
    _fold_constants(tree, text)


def _fold_constants(tree: ast.expr, text: str) -> None:
    """Evaluate each largest part of `tree` that reads no name, once: what it costs is known
    now, whatever the server says later."""
    todo: list[ast.AST] = [tree]
    ev = _evaluator()
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Constant | ast.Name):
            continue
        if isinstance(node, ast.expr) and not any(
            isinstance(n, ast.Name) and n.id not in FUNCTIONS for n in ast.walk(node)
        ):
            ev.names = {}
            try:
                ev.eval(text, previously_parsed=node)
            except cost.CostError as exc:
                raise ExprError(f"{exc} in {cost.quote(text)}") from None
            except Exception:  # undefined maths (1/0) is unknown at run time, not a load error
                pass
            continue
        todo.extend(ast.iter_child_nodes(node))


def compile_expr(text: str, allowed: Callable[[str], bool]) -> Expr:
    """Parse and check `text`; `allowed(name)` says whether the context defines a name."""
    problem = cost.too_long("expression", text, cost.MAX_EXPR_CHARS)
    if problem is not None:
        raise ExprError(problem)
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"cannot parse expression {cost.quote(text)}: {exc.msg}") from None
    except (RecursionError, MemoryError):
        raise ExprError(f"expression nests too deep: {cost.quote(text)}") from None
    names: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, _NODES):
            raise ExprError(
                f"{type(node).__name__} is not allowed in expression {cost.quote(text)}"
            )
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
                fname = node.func.id if isinstance(node.func, ast.Name) else "?"
                raise ExprError(
                    f"unknown function {cost.quote(fname)} in {cost.quote(text)} "
                    f"(allowed: {', '.join(FUNCTIONS)})"
                )
            if node.keywords:
                raise ExprError(f"keyword arguments are not allowed in {cost.quote(text)}")
        elif isinstance(node, ast.Name) and node.id not in FUNCTIONS:
            if not allowed(node.id):
                raise ExprError(f"unknown name {cost.quote(node.id)} in {cost.quote(text)}")
            names.add(node.id)
        elif isinstance(node, ast.Constant) and not isinstance(node.value, (int, float, str, bool)):
            raise ExprError(
                f"constant {cost.quote(node.value)} is not allowed in {cost.quote(text)}"
            )
    _check_cost(tree.body, text)
    # simpleeval evaluates an `Expr` statement node; keep that form for previously_parsed.
    body = ast.parse(text.strip()).body
    return Expr(text.strip(), body[0], frozenset(names))
