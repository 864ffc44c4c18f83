"""A rule's conditions, expressions and durations, from YAML to schema values, checked strictly.

Validation is strict because rules run unattended: unknown keys, signals, functions, names
and knobs are errors, every expression is parsed and checked here (see `expr`), and operands
must suit their function (a counter takes `rate`, a histogram `histogram_quantile`). Every
error is a `Bad` carrying the line of the key at fault, which the loader turns into one line,
file:line: rule-id: what.

This module holds what a condition is made of (operands, measures, comparisons, combinators,
knob tests) and the pieces every part of a rule reads (durations, thresholds, expressions,
text templates); `ruleparse` builds a whole rule on it, and `loader` reads the files.
"""

from __future__ import annotations

import contextlib
import math
import re
import string
from typing import Any

from vtop import durations, untrusted
from vtop.signals.catalog import BY_NAME, Kind
from vtop.triage import cost, derived
from vtop.triage.cost import quote
from vtop.triage.expr import Expr, ExprError, compile_expr
from vtop.triage.schema import (
    CLEAR,
    FUNCTIONS,
    GAUGE_FUNCTIONS,
    OPS,
    All,
    AnyOf,
    Compare,
    Cond,
    Function,
    IfKnown,
    KnobIs,
    Measure,
    Not,
    Operand,
    Sample,
    Threshold,
)
from vtop.triage.yamlmarks import LineDict

_COMBINATORS = ("all", "any", "not", "if_known")
_OPERAND = re.compile(r'^([a-z_][a-z0-9_]*)(?:\{(?:([a-z_]+)=)?"?([^"}]*)"?\})?$')
MAX_RULE_DURATION_S = 7 * 86400.0
"""A rule's windows and times: at most a week (`window: since_start` reaches further)."""
SINCE_START = "since_start"
"""The window that reaches back to the server's start (`Measure.since_start`)."""


class Bad(ValueError):
    """One error in a rule: the line of the offending key, and what is wrong there."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


def placeholders(template: str) -> tuple[str, ...]:
    """The names a text template's `{placeholders}` read, in order."""
    return tuple(f for _, f, _, _ in string.Formatter().parse(template) if f)


def parse_duration(value: object, line: int, what: str) -> float:
    """A YAML duration: a number of seconds, or text `vtop.durations` reads (30s, 2m, 1h30m)."""
    if isinstance(value, bool):
        raise Bad(line, f"{what}: expected a duration like 30s or 2m, got {quote(value)}")
    seconds: float | None = None
    if isinstance(value, int | float):
        if value < 0:
            raise Bad(line, f"{what}: a duration cannot be negative")
        seconds = float(value) if abs(value) < 1e300 else math.inf
    elif isinstance(value, str) and len(value) <= 40:
        with contextlib.suppress(ValueError):
            seconds = durations.parse(value)
    if seconds is None or math.isnan(seconds):
        raise Bad(line, f"{what}: expected a duration like 30s or 2m, got {quote(value)}")
    if seconds > MAX_RULE_DURATION_S:
        raise Bad(
            line, f"{what}: at most {durations.exact(MAX_RULE_DURATION_S)}, got {quote(value)}"
        )
    return seconds


class CondParser:
    """Parses the names, expressions and conditions of one rule; raises `Bad` with the line of
    the offending key. `RuleParser` (ruleparse.py) adds the rest of a rule and the names its
    `values:` define (`value_names`), which later expressions may read."""

    def __init__(self, rid: str) -> None:
        self.rid = rid
        self.value_names: set[str] = set()
        self.conditions = 0
        """Conditions parsed so far in this rule (its `when`, `decisive`, `escalate`)."""

    def counted(self, line: int) -> None:
        """One more condition; past `cost.MAX_CONDITIONS` in one rule, `Bad`."""
        self.conditions += 1
        if self.conditions > cost.MAX_CONDITIONS:
            raise Bad(line, f"more than {cost.MAX_CONDITIONS} conditions in one rule")

    # -- names and expressions ----------------------------------------------------------------

    def allowed(self, name: str) -> bool:
        return derived.name_known(name) or name in self.value_names

    def expr(self, text: object, line: int, what: str) -> Expr:
        if isinstance(text, bool) or not isinstance(text, str | int | float):
            raise Bad(line, f"{what}: expected a number or an expression, got {quote(text)}")
        try:
            return compile_expr(str(text), self.allowed)
        except ExprError as exc:
            raise Bad(line, f"{what}: {exc}") from None

    def threshold(self, value: object, line: int, what: str) -> Threshold:
        if isinstance(value, int | float) and not isinstance(value, bool):
            try:
                return float(value)
            except OverflowError:
                raise Bad(line, f"{what}: {quote(value)} is too large for a number") from None
        return self.expr(value, line, what)

    def template(self, text: object, line: int, what: str) -> str:
        """A `{name:spec}` text, within the cost model (its length, its placeholders, and
        each one's format width and precision: `{x:999999999}` would pad to a gigabyte), and
        inert: a rule file may come from anyone, and what a template says reaches the screen
        and the reports (`untrusted.clean`, uncut: a cut could split a placeholder)."""
        if not isinstance(text, str):
            raise Bad(line, f"{what}: expected text, got {quote(text)}")
        problem = cost.too_long(what, text, cost.MAX_TEMPLATE_CHARS)
        if problem is not None:
            raise Bad(line, problem)
        text = untrusted.clean(text, None)
        try:
            parsed = list(string.Formatter().parse(text))
        except ValueError as exc:
            raise Bad(line, f"{what}: {exc}") from None
        fields = [p for p in parsed if p[1] is not None]
        if len(fields) > cost.MAX_PLACEHOLDERS:
            raise Bad(line, f"{what}: {len(fields)} placeholders, at most {cost.MAX_PLACEHOLDERS}")
        for _, field_name, spec, conversion in fields:
            assert field_name is not None
            if not field_name.isidentifier() or conversion is not None:
                raise Bad(
                    line,
                    f"{what}: placeholder {{{cost.quote(field_name)[1:-1]}}} must be a plain name",
                )
            if not self.allowed(field_name):
                raise Bad(line, f"{what}: unknown name {quote(field_name)} in placeholder")
            problem = cost.format_spec_problem(spec or "")
            if problem is not None:
                raise Bad(line, f"{what}: {problem} for {field_name}")
            try:
                format(1.0, spec or "")
            except ValueError:
                raise Bad(line, f"{what}: bad format {quote(spec)} for {field_name}") from None
        return text

    # -- conditions -----------------------------------------------------------------------------

    def operand(self, text: object, fn: Function, line: int) -> Operand:
        if not isinstance(text, str) or not (m := _OPERAND.match(text.strip())):
            raise Bad(line, f"{fn}: expected a signal name, got {quote(text)}")
        name, label_name, label = m.group(1), m.group(2), m.group(3) or ""
        sig = BY_NAME.get(name)
        der = derived.DERIVED.get(name)
        if sig is None and der is None:
            raise Bad(line, f"unknown signal {quote(name)} (see rules/README.md for the list)")
        if label:
            if sig is None or sig.label is None:
                raise Bad(line, f"signal {quote(name)} has no label to select")
            if label_name and label_name != sig.label:
                raise Bad(
                    line,
                    f"signal {quote(name)} is labelled by {quote(sig.label)}, "
                    f"not {quote(label_name)}",
                )
        if der is not None:
            if fn == "value" and der.kind != "window":
                raise Bad(
                    line, f"value: {quote(name)} is a per-poll signal; use avg_over_time etc."
                )
            if fn != "value" and der.kind == "window":
                raise Bad(line, f"{fn}: {quote(name)} only exists over a window; use value:")
            if fn not in GAUGE_FUNCTIONS and fn != "value":
                raise Bad(line, f"{fn}: does not apply to derived signal {quote(name)}")
        elif sig is not None:
            kind = sig.kind
            if fn == "value":
                raise Bad(line, f"value: takes a window-derived signal, not {quote(name)}")
            if kind is Kind.HISTOGRAM and fn not in ("histogram_quantile", "histogram_mean"):
                raise Bad(line, f"{fn}: {quote(name)} is a histogram; use histogram_quantile")
            if kind is Kind.COUNTER and fn not in ("rate", "increase"):
                raise Bad(line, f"{fn}: {quote(name)} is a counter; use rate or increase")
            if kind in (Kind.GAUGE, Kind.INFO) and fn not in GAUGE_FUNCTIONS:
                raise Bad(line, f"{fn}: {quote(name)} is a gauge; use last or *_over_time")
        return Operand(name, label)

    def measure(self, node: LineDict, fn: Function) -> Measure:
        line = node.line_of(fn)
        window = 0.0
        since_start = False
        if fn != "last":
            if "window" not in node:
                raise Bad(line, f"{fn}: needs a window (e.g. window: 2m)")
            wline = node.line_of("window")
            if node["window"] == SINCE_START:
                since_start = True
                self.since_start_operand(node, fn, wline)
            else:
                window = parse_duration(node["window"], wline, "window")
                if window <= 0:
                    raise Bad(wline, "window must be positive")
        q: float | None = None
        if fn in ("quantile_over_time", "histogram_quantile"):
            qv = node.get("q")
            if isinstance(qv, bool) or not isinstance(qv, int | float) or not 0 <= qv <= 1:
                raise Bad(node.line_of("q"), f"{fn}: needs q between 0 and 1")
            q = float(qv)
        elif "q" in node:
            raise Bad(node.line_of("q"), f"{fn}: takes no q")
        if fn == "share_over_time":
            sub = node[fn]
            if not isinstance(sub, LineDict):
                raise Bad(line, "share_over_time: expected a sub-condition mapping")
            return Measure(fn, None, window, None, self.sample_cond(sub))
        return Measure(fn, self.operand(node[fn], fn, line), window, q, since_start=since_start)

    def since_start_operand(self, node: LineDict, fn: Function, line: int) -> None:
        """`window: since_start` reads what the server counted since it started: counters,
        histograms and the window-derived values built from them, never a gauge (the server
        keeps no history of a gauge; only vtop's polls do)."""
        if fn in ("rate", "increase", "histogram_quantile", "histogram_mean"):
            return
        name = str(node.get(fn, "")).strip()
        if fn == "value" and name in derived.SINCE_START_VALUES:
            return
        raise Bad(
            line,
            f"{fn}: window {SINCE_START} takes a counter, a histogram or one of "
            + ", ".join(sorted(derived.SINCE_START_VALUES))
            + " (a gauge has no history on the server)",
        )

    def sample_cond(self, node: LineDict) -> Cond:
        self.counted(node.line)
        if any(k in node for k in _COMBINATORS):
            return self.combinator(node, self.sample_cond)
        if "knob" in node:
            return self.knob_cond(node)
        if "signal" not in node:
            raise Bad(node.line, "share_over_time sub-conditions compare `signal:` per poll")
        extra = set(node) - {"signal", *OPS}
        if extra:
            raise Bad(node.line_of(sorted(extra)[0]), f"unknown key {quote(sorted(extra)[0])}")
        ops = [o for o in OPS if o in node]
        if len(ops) != 1:
            raise Bad(node.line, "a comparison needs exactly one of: " + ", ".join(OPS))
        operand = self.operand(node["signal"], "last", node.line_of("signal"))
        op = ops[0]
        return Sample(operand, op, self.threshold(node[op], node.line_of(op), op))

    def combinator(self, node: LineDict, inner: Any) -> Cond:
        keys = [k for k in _COMBINATORS if k in node]
        if len(keys) != 1 or len(node) != 1:
            raise Bad(
                node.line, "a combinator mapping holds exactly one of " + " / ".join(_COMBINATORS)
            )
        k = keys[0]
        body = node[k]
        if k in ("not", "if_known"):
            if not isinstance(body, LineDict):
                raise Bad(node.line_of(k), f"{k}: expected one condition")
            return Not(inner(body)) if k == "not" else IfKnown(inner(body))
        if not isinstance(body, list) or not body:
            raise Bad(node.line_of(k), f"{k}: expected a non-empty list of conditions")
        items = []
        for item in body:
            if not isinstance(item, LineDict):
                raise Bad(node.line_of(k), f"{k}: every item must be a condition mapping")
            items.append(inner(item))
        return All(tuple(items)) if k == "all" else AnyOf(tuple(items))

    def knob_cond(self, node: LineDict) -> KnobIs:
        knob = node["knob"]
        if not isinstance(knob, str) or knob not in derived.KNOBS:
            raise Bad(node.line_of("knob"), f"unknown knob {quote(knob)}")
        ops = [o for o in OPS if o in node]
        extra = set(node) - {"knob", *OPS}
        if len(ops) != 1 or extra:
            raise Bad(node.line, "a knob test is {knob: NAME, <one comparison>: VALUE}")
        op = ops[0]
        value = node[op]
        if not isinstance(value, str | int | float | bool) or (
            isinstance(value, str) and len(value) > cost.MAX_TEXT_CHARS
        ):
            raise Bad(
                node.line_of(op),
                f"{op}: a knob is compared with a number, true/false or "
                f"a short text, got {quote(value)}",
            )
        return KnobIs(str(knob), op, value)

    def cond(self, node: object, line: int) -> Cond:
        if not isinstance(node, LineDict):
            raise Bad(line, f"expected a condition mapping, got {quote(node)}")
        self.counted(node.line)
        if any(k in node for k in _COMBINATORS):
            return self.combinator(node, lambda n: self.cond(n, n.line))
        if "knob" in node:
            return self.knob_cond(node)
        fns = [f for f in FUNCTIONS if f in node]
        if len(fns) != 1:
            raise Bad(node.line, "a condition names one function: " + ", ".join(FUNCTIONS))
        fn = fns[0]
        ops = [o for o in OPS if o in node]
        if len(ops) != 1:
            raise Bad(node.line_of(fn), f"{fn}: needs exactly one of " + ", ".join(OPS))
        op = ops[0]
        allowed = {fn, "window", "q", op, CLEAR.get(op, "")}
        extra = sorted(set(node) - allowed)
        if extra:
            raise Bad(node.line_of(extra[0]), f"unknown key {quote(extra[0])} in a {op} condition")
        clear = None
        if CLEAR.get(op) in node:
            ck = CLEAR[op]
            clear = self.threshold(node[ck], node.line_of(ck), ck)
        thr = self.threshold(node[op], node.line_of(op), op)
        return Compare(self.measure(node, fn), op, thr, clear, node.line_of(fn))
