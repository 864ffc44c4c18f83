"""A formula's evaluation in words and numbers, step by step, from its syntax tree.

`min(ceil_to(demand_p95, 8), floor_to(known(kv_fit, 2 * max_num_seqs), 8), 4096)` is exact
but asks the reader to evaluate it. `explain` walks the same tree the safe evaluator runs
(`vtop.triage.expr`), evaluates every sub-expression over the same names, and says what each
step did: "demand p95 = 97 → rounded up to a multiple of 8: 104; sequences the KV pool fits at
90% = 156 → rounded down to a multiple of 8: 152; the smallest of 104, 152 and the rule's
maximum 4096: 104". A bare number would leave the reader to guess what it is, so a
recommendation's constant bounds (its `min:` and `max:`) come here named (`BOUNDS`), and read
as what they are.

It is one mechanism for every rule: functions and operators have fixed wording here, names
read as their labels (a knob as its own name, a rule value's `label`, a context value's below,
else the name with its underscores as spaces), and a rule value that is itself an expression
is explained first, in its own clause, so "sized for the FP8 cache beside it" shows as the
doubling it is. Nothing is written per rule, and the raw formula stays where it was
(`Recommendation.formula`).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping

import simpleeval

from vtop.triage.derived import KNOBS
from vtop.triage.expr import Value, _evaluator

CONTEXT_LABELS = {
    "kv_fit": "sequences the KV pool fits at 90%",
    "tokens_per_seq": "KV tokens per sequence (p90)",
    "demand_p95": "demand p95 (running + waiting)",
    "uptime_s": "seconds of history",
}
"""How the context values read in an explanation (`vtop.triage.derived.CONTEXT`)."""
RULE_MIN = "_rule_min"
RULE_MAX = "_rule_max"
BOUNDS = {RULE_MIN: "the rule's minimum", RULE_MAX: "the rule's maximum"}
"""The names `vtop.triage.recommend` gives a recommendation's constant bounds (`min: 1`,
`max: 4096`), and how they read: "the rule's maximum 4096". Like a constant, a bound that does
not bind says nothing."""

ROUNDING = {
    "ceil_to": "rounded up to a multiple of {1}",
    "floor_to": "rounded down to a multiple of {1}",
    "pow2_ceil": "rounded up to a power of two",
    "pow2_floor": "rounded down to a power of two",
    "pow2_round": "rounded to the nearest power of two",
    "ceil": "rounded up",
    "floor": "rounded down",
    "round": "rounded",
}
OPERATORS: dict[type, str] = {
    ast.Add: "+",
    ast.Sub: "−",
    ast.Mult: "×",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "mod",
    ast.Lt: "<",
    ast.LtE: "≤",
    ast.Gt: ">",
    ast.GtE: "≥",
    ast.Eq: "is",
    ast.NotEq: "is not",
}


NEGATED: dict[type, type] = {
    ast.Lt: ast.GtE,
    ast.GtE: ast.Lt,
    ast.Gt: ast.LtE,
    ast.LtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
}


def number(v: Value) -> str:
    """A value as a person reads it: `104`, `0.95`, `'fp8'`, `unknown`."""
    if v is None:
        return "unknown"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, str):
        return repr(v)
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e4 else f"{v:,.0f}"
    return str(v)


class _Explainer:
    def __init__(
        self, names: Mapping[str, Value], labels: Callable[[str], str], defs: Mapping[str, ast.AST]
    ) -> None:
        self.names = names
        self.labels = labels
        self.defs = defs
        self.clauses: list[str] = []
        self.defined: set[str] = set()

    def value(self, node: ast.AST) -> Value:
        ev = _evaluator()
        ev.names = self.names
        try:
            out = ev.eval("", previously_parsed=node)
        except (
            TypeError,
            ValueError,
            ZeroDivisionError,
            OverflowError,
            ArithmeticError,
            KeyError,
            NameError,
            AttributeError,
            simpleeval.InvalidExpression,
        ):
            return None
        return out if out is None or isinstance(out, (bool, int, float, str)) else None

    def term(self, node: ast.AST, ctx: str = "top", *, negate: bool = False) -> str:
        """How `node` reads inside its parent (`ctx`: "top" starts a clause, "operand" is an
        operand of arithmetic or a comparison, "item" one of min/max's arguments); steps
        worth a clause of their own are added on the way, innermost first."""
        v = self.value(node)
        if isinstance(node, ast.Constant):
            return number(v)
        if isinstance(node, ast.Name):
            return self.name(node.id, v, ctx)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return f"−{self.term(node.operand, 'operand')}"
        if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
            left, right = self.term(node.left, "operand"), self.term(node.right, "operand")
            said = f"{left} {OPERATORS[type(node.op)]} {right}"
            return f"({said})" if ctx == "operand" else f"{said} = {number(v)}"
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in OPERATORS:
            left = self.term(node.left, "operand")
            right = self.term(node.comparators[0], "operand")
            op = type(node.ops[0])
            return f"{left} {OPERATORS[NEGATED[op] if negate else op]} {right}"
        if negate:
            return f"not {self.term(node, ctx)}"
        if isinstance(node, ast.IfExp):
            test = bool(self.value(node.test))
            said = self.term(node.test, "operand", negate=not test)
            branch = self.term(node.body if test else node.orelse, ctx)
            return f"{branch} (as {said})"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            return self.call(node.func.id, node, v, ctx)
        return f"{ast.unparse(node)} = {number(v)}"

    def name(self, name: str, v: Value, ctx: str) -> str:
        label = self.labels(name)
        d = self.defs.get(name)
        if d is not None:
            if name in self.defined:
                return number(v)  # its own clause said what it is
            self.defined.add(name)
            self.clauses.append(f"{label} = {self.term(d)}")
            return number(v)
        if isinstance(v, str):
            return label if ctx == "operand" else f"{label} {number(v)}"
        return f"{label} = {number(v)}" if ctx == "top" else f"{label} {number(v)}"

    def call(self, fn: str, node: ast.Call, v: Value, ctx: str) -> str:
        args = node.args
        if fn == "known" and len(args) == 2:
            if self.value(args[0]) is not None:
                return self.term(args[0], ctx)
            first = args[0]
            what = self.labels(first.id) if isinstance(first, ast.Name) else ast.unparse(first)
            return f"{self.term(args[1], ctx)} ({what} unknown)"
        if fn in ("min", "max"):
            flat = self.flatten(fn, node)
            terms = [self.term(a, "item") for a in flat]
            moving = [i for i, a in enumerate(flat) if not _fixed(a)]
            if len(moving) == 1 and self.value(flat[moving[0]]) == v:
                return terms[moving[0]]  # a constant bound that does not bind says nothing
            which = "smallest" if fn == "min" else "largest"
            self.clauses.append(f"the {which} of {_and(terms)}: {number(v)}")
            return number(v)
        if fn in ROUNDING and args:
            inner = self.term(args[0])
            how = ROUNDING[fn].format(*(number(self.value(a)) for a in args))
            self.clauses.append(f"{inner} → {how}: {number(v)}")
            return number(v)
        if fn == "clamp" and len(args) == 3:
            inner, lo, hi = (self.term(a, "item") for a in args)
            self.clauses.append(f"{inner} kept between {lo} and {hi}: {number(v)}")
            return number(v)
        inner = ", ".join(self.term(a, "item") for a in args)
        return f"{fn}({inner}) = {number(v)}"

    def flatten(self, fn: str, node: ast.Call) -> list[ast.expr]:
        """`min(min(a, b), c)` reads as the smallest of a, b and c."""
        out: list[ast.expr] = []
        for a in node.args:
            if isinstance(a, ast.Call) and isinstance(a.func, ast.Name) and a.func.id == fn:
                out.extend(self.flatten(fn, a))
            else:
                out.append(a)
        return out


def _fixed(node: ast.AST) -> bool:
    """A number the rule wrote: a constant, or a constant bound named for the words."""
    return isinstance(node, ast.Constant) or (isinstance(node, ast.Name) and node.id in BOUNDS)


def _and(terms: list[str]) -> str:
    return terms[0] if len(terms) == 1 else ", ".join(terms[:-1]) + " and " + terms[-1]


def is_literal(formula: str) -> bool:
    """True for a formula that is one constant (`'fp8'`, `True`): the change says it all."""
    try:
        return isinstance(ast.parse(formula.strip(), mode="eval").body, ast.Constant)
    except SyntaxError:
        return False


def shown_formula(explanation: str, formula: str) -> str:
    """What a report prints beside a change: the words, else the formula (a recommendation
    built without them), never a bare constant."""
    return explanation or ("" if is_literal(formula) else formula)


def explain(
    formula: str,
    names: Mapping[str, Value],
    *,
    labels: Mapping[str, str] | None = None,
    defs: Mapping[str, str] | None = None,
) -> str:
    """`formula` evaluated over `names`, in words and numbers; "" for a constant (`'fp8'`,
    `True`: the change says it all) or a formula that does not parse.

    `labels`: how names read (else the context labels, else the name with spaces); `defs`:
    rule values defined by expressions, explained in a clause of their own where used.
    """
    try:
        tree = ast.parse(formula.strip(), mode="eval").body
        def_trees = {k: ast.parse(t.strip(), mode="eval").body for k, t in (defs or {}).items()}
    except SyntaxError:
        return ""
    if isinstance(tree, ast.Constant):
        return ""
    given = labels or {}

    def label(name: str) -> str:
        if name in KNOBS:
            return name
        said = given.get(name) or CONTEXT_LABELS.get(name) or BOUNDS.get(name)
        return said or name.replace("_", " ")

    ex = _Explainer(names, label, def_trees)
    last = ex.term(tree)
    result = number(ex.value(tree))
    if not ex.clauses or not ex.clauses[-1].endswith(f": {result}"):
        ex.clauses.append(last if last.endswith(result) else f"{last}: {result}")
    return "; ".join(ex.clauses)
