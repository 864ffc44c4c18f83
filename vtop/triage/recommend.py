"""A recommendation spec + this evaluation's numbers -> a concrete `Recommendation`.

pgtune's lesson: every value is a pure function of its inputs, with bounds and rounding, and
each input is shown with where it came from. The value formula runs in the safe evaluator over
the knobs, the context values (KV fit, demand shown) and the rule's own values; `min` / `max`
bound it; `round` makes it a whole number for integer knobs. A direction is a promise: a
`raise` whose formula does not land above the current value says nothing rather than "raise
max_num_seqs to 64" on a server already at 64. It does not stay silent, though: a change whose
condition (`if`) holds but whose value would not move the knob is `Withheld`, and the finding
says why (the rule's `withheld` text, e.g. "the KV pool fits only 114 sequences at 90%", else
the value and the current one), so a firing finding never ends up with neither advice nor word.

Confidence drops when an input was assumed rather than read (`Knob.assumed`): medium when any
input was assumed, low when the very knob being changed was, and the trade-off note then says
which values were assumed and how to tell vtop the real ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from vtop.knobs import KnobValue, format_value
from vtop.model import Knob, Recommendation
from vtop.triage.derived import CONTEXT
from vtop.triage.explain import RULE_MAX, RULE_MIN, explain
from vtop.triage.expr import Expr, Value
from vtop.triage.measure import Snapshot
from vtop.triage.schema import RecSpec, ValueDef
from vtop.triage.template import render

Confidence = Literal["high", "medium", "low"]
VERB = {"raise": "raising", "lower": "lowering"}
STEADY = 0.1
"""A recommendation keeps its value while a new computation lands within 10% of it."""


@dataclass(frozen=True, slots=True)
class Withheld:
    """A change the rule's condition asks for that its own bounds rule out, and why."""

    knob: str
    direction: str
    note: str
    """One line for the finding: `raising max_num_seqs is withheld: the KV pool fits only …`."""


def _number(x: Value) -> float | None:
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    return float(x)


def _inputs(
    exprs: list[Expr], values: Mapping[str, Value], defs: Mapping[str, ValueDef], snap: Snapshot
) -> dict[str, Knob | float | None]:
    """Every input the formulas read, expanded one level through rule values and context."""
    out: dict[str, Knob | float | None] = {}
    names: list[str] = []
    for e in exprs:
        names.extend(sorted(e.names))
    seen: set[str] = set()
    while names:
        name = names.pop(0)
        if name in seen:
            continue
        seen.add(name)
        knob = snap.knobs.get(name)
        if knob is not None:
            out[name] = knob
            continue
        if name in values:
            out[name] = _number(values[name])
            d = defs.get(name)
            if d is not None and d.expr is not None:
                names.extend(sorted(d.expr.names))
            continue
        out[name] = _number(snap.resolve(name))
        if name in CONTEXT:
            names.extend(CONTEXT[name].knobs)
            if name == "kv_fit":
                names.append("tokens_per_seq")
    return out


def bounded(formula: str, lo: Expr | None, hi: Expr | None) -> str:
    """The formula with its bounds as a person writes them: `max(…, 1)`, `min(…, 4096)`,
    `clamp(…, lo, hi)` only when both are set (no infinite bounds on display)."""
    return _bounded(formula, lo.text if lo else None, hi.text if hi else None)


def _bounded(formula: str, lo: str | None, hi: str | None) -> str:
    if lo is not None and hi is not None:
        return f"clamp({formula}, {lo}, {hi})"
    if hi is not None:
        return f"min({formula}, {hi})"
    if lo is not None:
        return f"max({formula}, {lo})"
    return formula


def _named_bound(bound: Expr | None, name: str, names: dict[str, Value]) -> str | None:
    """A constant bound as `name`, its value put in `names`, so the words say what the number
    is ("the rule's maximum 4096", `vtop.triage.explain.BOUNDS`); a bound over knobs or
    values as written, its own terms say what it is."""
    if bound is None or bound.names:
        return bound.text if bound is not None else None
    names[name] = bound.eval({})
    return name


def steady(rec: Recommendation, previous: KnobValue) -> Recommendation:
    """The previous value while the new one lands within `STEADY` of it and still keeps the
    direction's promise: a recommendation does not hop between rounding steps (96, 104, 96)
    from one poll to the next when its evidence barely moves."""
    new, old = _number(rec.new_value), _number(previous)
    cur = _number(rec.current.value) if rec.current is not None else None
    if new is None or old is None or new == old or abs(new - old) > STEADY * abs(old):
        return rec
    if cur is not None and not _keeps_promise(rec.direction, old, cur):
        return rec
    kept = (
        f"; kept at {format_value(previous)}, within {STEADY:.0%} of it (advice does not "
        "hop between rounding steps)"
    )
    return replace(
        rec, new_value=previous, explanation=rec.explanation + kept if rec.explanation else ""
    )


def _keeps_promise(direction: str, new: float, cur: float) -> bool:
    """False when a raise would not raise the knob, or a lower would not lower it."""
    return not ((direction == "raise" and new <= cur) or (direction == "lower" and new >= cur))


def _resolved(
    names: Sequence[str], values: Mapping[str, Value], snap: Snapshot
) -> dict[str, Value]:
    """The values a template names: the rule's own `values`, else the snapshot's."""
    return {n: values[n] if n in values else snap.resolve(n) for n in names}


def _withheld(
    spec: RecSpec, values: Mapping[str, Value], snap: Snapshot, new: KnobValue, cur: KnobValue
) -> Withheld:
    why = (
        render(spec.withheld, _resolved(spec.withheld_names, values, snap)) if spec.withheld else ""
    )
    if not why:
        why = f"the formula gives {format_value(new)}, now {format_value(cur)}"
    verb = VERB.get(spec.direction, spec.direction)
    return Withheld(spec.knob, spec.direction, f"{verb} {spec.knob} is withheld: {why}")


def build(
    spec: RecSpec, values: Mapping[str, Value], defs: Mapping[str, ValueDef], snap: Snapshot
) -> Recommendation | Withheld | None:
    """The recommendation; `Withheld` when it applies but its value would not move the knob
    the promised way; None when it does not apply or cannot be computed."""

    def ev(e: Expr) -> Value:
        return e.eval(snap.names(e, values))

    if spec.when is not None and not ev(spec.when):
        return None
    current = snap.knobs.get(spec.knob)
    cur = current.value if current is not None else None
    new: KnobValue
    if spec.direction in ("enable", "disable"):
        new = spec.direction == "enable"
        if cur is new:
            return None
    else:
        raw = ev(spec.value)
        if isinstance(raw, str):
            new = raw
        else:
            x = _number(raw)
            if x is None:
                return None
            lo = _number(ev(spec.minimum)) if spec.minimum is not None else None
            hi = _number(ev(spec.maximum)) if spec.maximum is not None else None
            if lo is not None:
                x = max(x, lo)
            if hi is not None:
                x = min(x, hi)
            new = round(x) if spec.rounding == "int" else round(x, 4)
        c = _number(cur)
        n = _number(new)
        if spec.direction in ("raise", "lower") and c is not None:
            if n is None:
                return None
            if not _keeps_promise(spec.direction, n, c):
                return _withheld(spec, values, snap, new, cur)
        if spec.direction == "set" and new == cur:
            return None
    exprs = [e for e in (spec.value, spec.minimum, spec.maximum) if e is not None]
    inputs = _inputs(exprs, values, defs, snap)
    if current is not None:
        inputs = {spec.knob: current, **{k: v for k, v in inputs.items() if k != spec.knob}}
    assumed = [k for k in inputs.values() if isinstance(k, Knob) and k.assumed]
    confidence: Confidence = "high"
    if assumed:
        confidence = "medium"
    if current is None or current.assumed:
        confidence = "low"
    note = render(spec.tradeoff, _resolved(spec.tradeoff_names, values, snap))
    if assumed:
        said = "; ".join(f"{k.name} = {k.value} ({k.detail or k.provenance})" for k in assumed)
        note = (note + " " if note else "") + f"Assumed, not read from the server: {said}."
    formula = bounded(spec.value.text, spec.minimum, spec.maximum)
    explanation = _explanation(spec, exprs, values, defs, snap)
    direction = spec.direction
    c, n = _number(cur), _number(new)
    if direction == "set" and c is not None and n is not None:
        direction = "raise" if n > c else "lower"
    return Recommendation(
        knob=spec.knob,
        current=current,
        new_value=new,
        direction=direction,
        formula=formula,
        inputs=inputs,
        tradeoff=note,
        confidence=confidence,
        explanation=explanation,
    )


def _explanation(
    spec: RecSpec,
    exprs: list[Expr],
    values: Mapping[str, Value],
    defs: Mapping[str, ValueDef],
    snap: Snapshot,
) -> str:
    """The bounded formula's arithmetic in words (`vtop.triage.explain`), over the names it
    and the rule values it reads (through their own expressions) resolve to this evaluation,
    its constant bounds named for what they are."""
    names: dict[str, Value] = {}
    exprs_defs: dict[str, str] = {}
    todo = list(exprs)
    while todo:
        e = todo.pop()
        for name, v in snap.names(e, values).items():
            if name in names:
                continue
            names[name] = v
            d = defs.get(name)
            if d is not None and d.expr is not None:
                exprs_defs[name] = d.expr.text
                todo.append(d.expr)
    labels = {name: d.label for name, d in defs.items() if d.label}
    lo = _named_bound(spec.minimum, RULE_MIN, names)
    hi = _named_bound(spec.maximum, RULE_MAX, names)
    formula = _bounded(spec.value.text, lo, hi)
    return explain(formula, names, labels=labels, defs=exprs_defs)
