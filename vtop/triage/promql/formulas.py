"""Formulas as PromQL: thresholds, values and recommendations written as expressions.

Rule formulas are Python expressions (`vtop.triage.expr`), so their translation walks the
syntax tree; every node becomes a typed `Fragment`, which lets numbers fold into one literal as
vtop computes them (`2 * 1024` is `2048`, not a PromQL product), makes a number a per-instance
vector only where PromQL needs one, and turns a comparison into a filter (present where it
holds). `min`/`max` skip an unknown argument as vtop's do; `known(a, b)` is `a or b`. A
recommendation is translated leniently (a knob nobody gave is an empty vector, not a reason to
leave the rule out) and, where it has no PromQL, is said in words with the reason.

This is the middle layer of the translator (`measures` below, `conditions` above).
"""

from __future__ import annotations

import ast

from vtop import knobs
from vtop.sources.promql import quote
from vtop.triage.derived import CONTEXT_WINDOW_S, KNOBS
from vtop.triage.expr import FUNCTIONS, Expr
from vtop.triage.promql.measures import MeasureTranslator
from vtop.triage.promql.terms import PROMQL_OP, Fragment, NotExpressible, literal
from vtop.triage.recommend import bounded
from vtop.triage.schema import KnobIs, Measure, Op, Operand, RecSpec


class FormulaTranslator(MeasureTranslator):
    """PromQL for one rule's formulas (values, thresholds, recommendations) over its measures."""

    # -- expressions ---------------------------------------------------------------------------

    def expr(self, e: Expr) -> Fragment:
        tree = e.tree.value if isinstance(e.tree, ast.Expr) else e.tree
        return self._node(tree, e.text)

    def _vec(self, q: Fragment) -> str:
        """A fragment as a vector (a number becomes the number for every instance)."""
        if q.kind == "scalar":
            return f"({self.universe} * {q.text})"
        if q.kind in ("vector", "filter"):
            return q.text
        raise NotExpressible(f"{q.text} is not a number")

    def _name(self, name: str) -> Fragment:
        if name in self.values:
            d = self.values[name]
            if d.measure is not None:
                return Fragment(self.measure(d.measure), "vector")
            assert d.expr is not None
            return self.expr(d.expr)
        if name in KNOBS:
            return Fragment(self.knob(name), "vector")
        w = CONTEXT_WINDOW_S
        if name == "demand_p95":
            return Fragment(
                self.measure(Measure("quantile_over_time", Operand("demand"), w, 0.95)), "vector"
            )
        if name == "tokens_per_seq":
            return Fragment(
                self.measure(Measure("quantile_over_time", Operand("kv_tokens_per_seq"), w, 0.9)),
                "vector",
            )
        if name == "kv_fit":
            per = self._name("tokens_per_seq").text
            cap = self.knob("kv_capacity_tokens")
            return Fragment(f"({knobs.KV_WALL:g} * {cap} / {per})", "vector")
        if name == "uptime_s":
            return Fragment(f"(time() - max by ({self.by}) (process_start_time_seconds))", "vector")
        raise NotExpressible(f"no PromQL for {name!r}")

    def _node(self, node: ast.AST, text: str) -> Fragment:
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, bool):
                return Fragment(str(v), "bool", v)
            if isinstance(v, int | float):
                return Fragment(literal(float(v)), "scalar", float(v))
            return Fragment(quote(str(v)), "string", str(v))
        if isinstance(node, ast.Name):
            return self._name(node.id)
        if isinstance(node, ast.UnaryOp):
            inner = self._node(node.operand, text)
            if isinstance(node.op, ast.USub):
                if inner.kind == "scalar" and isinstance(inner.value, float):
                    return Fragment(literal(-inner.value), "scalar", -inner.value)
                return Fragment(f"-({self._vec(inner)})", "vector")
            if isinstance(node.op, ast.UAdd):
                return inner
            if isinstance(node.op, ast.Not):
                return Fragment(
                    f"({self.universe} unless on ({self.by}) ({self._filter(inner)}))", "filter"
                )
        if isinstance(node, ast.BinOp):
            return self._binop(node, text)
        if isinstance(node, ast.Compare):
            return self._compare(node, text)
        if isinstance(node, ast.BoolOp):
            word = "and" if isinstance(node.op, ast.And) else "or"
            parts = [self._filter(self._node(v, text)) for v in node.values]
            return Fragment("(" + f" {word} ".join(f"({p})" for p in parts) + ")", "filter")
        if isinstance(node, ast.IfExp):
            test = self._filter(self._node(node.test, text))
            body = self._vec(self._node(node.body, text))
            orelse = self._vec(self._node(node.orelse, text))
            return Fragment(f"(({body} and on ({self.by}) {test}) or {orelse})", "vector")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            return self._call(node.func.id, [self._node(a, text) for a in node.args], text)
        raise NotExpressible(f"no PromQL for {ast.unparse(node)!r} in {text!r}")

    def _filter(self, q: Fragment) -> str:
        if q.kind == "filter":
            return q.text
        if q.kind == "bool":
            return self.universe if q.value else f"({self.universe} unless {self.universe})"
        raise NotExpressible(f"{q.text} is not a condition")

    def _binop(self, node: ast.BinOp, text: str) -> Fragment:
        a, b = self._node(node.left, text), self._node(node.right, text)
        ops = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Mod: "%"}
        if (
            a.kind == b.kind == "scalar"
            and isinstance(a.value, float)
            and isinstance(b.value, float)
        ):
            folded = _fold(node.op, a.value, b.value)
            if folded is not None:
                return Fragment(literal(folded), "scalar", folded)
        for q in (a, b):
            if q.kind not in ("scalar", "vector"):
                raise NotExpressible(f"arithmetic on {q.text} in {text!r}")
        if isinstance(node.op, ast.FloorDiv):
            return Fragment(f"floor({a.text} / {b.text})", "vector")
        op = ops.get(type(node.op))
        if op is None:
            raise NotExpressible(f"operator {type(node.op).__name__} in {text!r}")
        return Fragment(f"({a.text} {op} {b.text})", "vector")

    def _compare(self, node: ast.Compare, text: str) -> Fragment:
        if len(node.ops) != 1:
            raise NotExpressible(f"chained comparison in {text!r}")
        ops: dict[type[ast.cmpop], Op] = {
            ast.Gt: "above",
            ast.GtE: "at_least",
            ast.Lt: "below",
            ast.LtE: "at_most",
            ast.Eq: "equals",
            ast.NotEq: "not_equals",
        }
        op: Op = ops[type(node.ops[0])]
        left, right = node.left, node.comparators[0]
        # knob == 'auto' / knob == True: a knob test (by label when the page carries it)
        if isinstance(left, ast.Name) and left.id in KNOBS and isinstance(right, ast.Constant):
            value = right.value
            if isinstance(value, str | bool | int | float) and (
                isinstance(value, str | bool) or op in ("equals", "not_equals")
            ):
                return Fragment(self.knob_test(KnobIs(left.id, op, value)), "filter")
        a, b = self._node(left, text), self._node(right, text)
        if a.kind == b.kind == "scalar":
            assert isinstance(a.value, float) and isinstance(b.value, float)
            truth = {
                "above": a.value > b.value,
                "at_least": a.value >= b.value,
                "below": a.value < b.value,
                "at_most": a.value <= b.value,
                "equals": a.value == b.value,
                "not_equals": a.value != b.value,
            }[op]
            return Fragment(str(truth), "bool", truth)
        if a.kind == "scalar":
            mirror: dict[Op, Op] = {
                "above": "below",
                "below": "above",
                "at_least": "at_most",
                "at_most": "at_least",
            }
            a, b, op = b, a, mirror.get(op, op)
        for q in (a, b):
            if q.kind not in ("scalar", "vector"):
                raise NotExpressible(f"comparison of {q.text} in {text!r}")
        return Fragment(f"({a.text} {PROMQL_OP[op]} {b.text})", "filter")

    def _call(self, fn: str, args: list[Fragment], text: str) -> Fragment:
        scalars = [a.value for a in args if a.kind == "scalar"]
        if len(scalars) == len(args) and all(isinstance(v, float) for v in scalars):
            folded = _fold_call(fn, [float(v) for v in scalars])  # type: ignore[arg-type]
            if folded is not None:
                return Fragment(literal(folded), "scalar", folded)
        if fn in ("min", "max"):
            # each argument tagged apart, then min/max over the tags: an unknown (absent)
            # argument is skipped as vtop's min/max skip it, and each argument is written once
            parts = " or ".join(
                f'label_replace({self._vec(a)}, "vtop_arg", "{i}", "", "")'
                for i, a in enumerate(args)
            )
            return Fragment(f"{fn} by ({self.by}) ({parts})", "vector")
        if fn == "known":
            return Fragment(f"({self._vec(args[0])} or {self._vec(args[1])})", "vector")
        x = args[0]
        if x.kind != "vector":
            raise NotExpressible(f"{fn}() of {x.text} in {text!r}")
        if fn in ("ceil", "floor", "abs"):
            return Fragment(f"{fn}({x.text})", "vector")
        if fn == "round":
            if len(args) > 1:
                raise NotExpressible(f"round() to digits in {text!r}")
            return Fragment(f"round({x.text})", "vector")
        if fn in ("floor_to", "ceil_to"):
            step = args[1]
            base = "floor" if fn == "floor_to" else "ceil"
            return Fragment(f"({base}({x.text} / {step.text}) * {step.text})", "vector")
        if fn.startswith("pow2_"):
            how = {"pow2_floor": "floor", "pow2_ceil": "ceil", "pow2_round": "round"}[fn]
            return Fragment(f"(2 ^ {how}(log2(clamp_min({x.text}, 1))))", "vector")
        if fn == "clamp":
            lo, hi = args[1], args[2]
            if lo.kind == hi.kind == "scalar":
                return Fragment(f"clamp({x.text}, {lo.text}, {hi.text})", "vector")
            return self._call("min", [self._call("max", [x, lo], text), hi], text)
        raise NotExpressible(f"{fn}() in {text!r}")

    # -- recommendations -----------------------------------------------------------------------

    def recommendation(self, spec: RecSpec) -> tuple[str, str | None, str | None]:
        """(the formula as vtop states it, its PromQL or None, why not)."""
        text = bounded(spec.value.text, spec.minimum, spec.maximum)
        said = f"{spec.direction} {spec.knob} to {text}"
        if spec.direction in ("enable", "disable"):
            said = f"{spec.direction} {spec.knob}"
        if spec.when is not None:
            said += f", if {spec.when.text}"
        self.lenient = True
        try:
            if spec.direction in ("enable", "disable"):
                return said, None, None
            q = self.expr(spec.value)
            if q.kind == "string":
                return said, None, None
            out = self._vec(q)
            if spec.minimum is not None:
                out = self._call(
                    "max", [Fragment(out, "vector"), self.expr(spec.minimum)], text
                ).text
            if spec.maximum is not None:
                out = self._call(
                    "min", [Fragment(out, "vector"), self.expr(spec.maximum)], text
                ).text
            if spec.rounding == "int":
                out = f"round({out})"
            if spec.when is not None:
                out = f"({out} and on ({self.by}) {self._filter(self.expr(spec.when))})"
            return said, out, None
        except NotExpressible as exc:
            return said, None, str(exc)
        finally:
            self.lenient = False


def _fold(op: ast.operator, a: float, b: float) -> float | None:
    try:
        if isinstance(op, ast.Add):
            return a + b
        if isinstance(op, ast.Sub):
            return a - b
        if isinstance(op, ast.Mult):
            return a * b
        if isinstance(op, ast.Div):
            return a / b
        if isinstance(op, ast.FloorDiv):
            return float(a // b)
        if isinstance(op, ast.Mod):
            return a % b
    except ZeroDivisionError:
        return None
    return None


def _fold_call(fn: str, args: list[float]) -> float | None:
    try:
        out = FUNCTIONS[fn](*args)
    except (TypeError, ValueError, ZeroDivisionError, KeyError):
        return None
    return float(out) if isinstance(out, int | float) and not isinstance(out, bool) else None
