"""Conditions as PromQL: a rule's `when` as a filter vector, present where it holds.

A comparison is a PromQL filter (`>` / `>=` …), `all` is `and`, `any` is `or`, and `not` is
pushed down to the comparisons (`negate`), so unknown stays unknown as in vtop; `if_known` is
"holds, or the measure is absent", and a `share_over_time` sub-condition is a 0/1 vector
(`sample`). A branch of an `any` that PromQL cannot express is left out and said so: the alert
then fires on the others only, never where vtop would not.

This is the top layer of the translator (`measures`, then `formulas`, below it): `Translator`
is the whole of it, what `alerts` builds one of per rule.
"""

from __future__ import annotations

from vtop.triage.promql.formulas import FormulaTranslator
from vtop.triage.promql.terms import PROMQL_OP, Fragment, NotExpressible, literal
from vtop.triage.schema import (
    All,
    AnyOf,
    Compare,
    Cond,
    IfKnown,
    KnobIs,
    Measure,
    Not,
    Op,
    Sample,
    Threshold,
)

NEGATE: dict[Op, Op] = {
    "above": "at_most",
    "at_least": "below",
    "below": "at_least",
    "at_most": "above",
    "equals": "not_equals",
    "not_equals": "equals",
}


class Translator(FormulaTranslator):
    """PromQL for one rule's conditions, values and formulas."""

    # -- conditions ------------------------------------------------------------------------------

    def threshold(self, t: Threshold) -> Fragment:
        if isinstance(t, int | float):
            return Fragment(literal(float(t)), "scalar", float(t))
        return self.expr(t)

    def cond(self, c: Cond, active: bool) -> str:
        """A condition as a filter: present, per instance, where it holds."""
        if isinstance(c, Compare):
            op, thr = c.op, c.threshold
            if active and c.clear is not None:
                op = "at_least" if c.op in ("above", "at_least") else "at_most"
                thr = c.clear
            t = self.threshold(thr)
            if t.kind not in ("scalar", "vector"):
                raise NotExpressible(f"threshold {thr!r} is not a number")
            return f"{self.measure(c.measure)} {PROMQL_OP[op]} {t.text}"
        if isinstance(c, KnobIs):
            return self.knob_test(c)
        if isinstance(c, All):
            return "(" + "\nand\n".join(f"({self.cond(i, active)})" for i in c.items) + ")"
        if isinstance(c, AnyOf):
            # A branch PromQL cannot express is left out, and said so: the alert then fires
            # on the others only (never where vtop would not).
            kept = []
            for item in c.items:
                try:
                    kept.append(f"({self.cond(item, active)})")
                except NotExpressible as exc:
                    self.partial.setdefault(str(exc), None)
            if not kept:
                raise NotExpressible("; ".join(self.partial))
            return "(" + "\nor\n".join(kept) + ")"
        if isinstance(c, Not):
            return self.cond(negate(c.item), active)
        if isinstance(c, IfKnown):
            known = " and ".join(f"({self.measure(m)})" for m in compared_measures(c.item))
            if not known:
                raise NotExpressible("if_known over a knob test")
            return (
                f"(({self.cond(c.item, active)})\nor\n"
                f"({self.universe} unless on ({self.by}) ({known})))"
            )
        raise NotExpressible(f"{type(c).__name__} outside share_over_time")

    def sample(self, c: Cond) -> str:
        """A per-evaluation 0/1 vector for a share_over_time sub-condition."""
        if isinstance(c, Sample):
            t = self.threshold(c.threshold)
            x = self.instant(c.operand)
            return f"({x} {PROMQL_OP[c.op]} bool {t.text})"
        if isinstance(c, All):
            return "(" + " * ".join(self.sample(i) for i in c.items) + ")"
        if isinstance(c, AnyOf):
            return "clamp_max(" + " + ".join(self.sample(i) for i in c.items) + ", 1)"
        if isinstance(c, Not):
            return f"(1 - {self.sample(c.item)})"
        if isinstance(c, IfKnown):
            return f"({self.sample(c.item)} or {self.universe})"
        if isinstance(c, KnobIs):
            return f"(({self.knob_test(c)} * 0 + 1) or ({self.universe} * 0))"
        raise NotExpressible(f"{type(c).__name__} inside share_over_time")


def negate(c: Cond) -> Cond:
    """`not c`, pushed down to the comparisons (three-valued: unknown stays unknown)."""
    if isinstance(c, Compare):
        if c.clear is not None:
            raise NotExpressible("not over a comparison with a recovery threshold")
        return Compare(c.measure, NEGATE[c.op], c.threshold, None, c.line)
    if isinstance(c, KnobIs):
        return KnobIs(c.knob, NEGATE[c.op], c.value)
    if isinstance(c, All):
        return AnyOf(tuple(negate(i) for i in c.items))
    if isinstance(c, AnyOf):
        return All(tuple(negate(i) for i in c.items))
    if isinstance(c, Not):
        return c.item
    if isinstance(c, Sample):
        return Sample(c.operand, NEGATE[c.op], c.threshold)
    raise NotExpressible(f"not over {type(c).__name__}")


def compared_measures(c: Cond) -> list[Measure]:
    """The measures a condition compares (for `if_known`: absent measure = unknown)."""
    if isinstance(c, Compare):
        return [c.measure]
    if isinstance(c, All | AnyOf):
        return [m for i in c.items for m in compared_measures(i)]
    if isinstance(c, Not | IfKnown):
        return compared_measures(c.item)
    return []


def has_clear(c: Cond) -> bool:
    if isinstance(c, Compare):
        return c.clear is not None
    if isinstance(c, All | AnyOf):
        return any(has_clear(i) for i in c.items)
    if isinstance(c, Not | IfKnown):
        return has_clear(c.item)
    return False
