"""The levels at which a value on screen turns warning or critical: the rules' own numbers.

The screen must colour a value by the numbers the triage rules judge it by, never by separate
magic numbers. `from_rules` reads them out of the loaded rule catalog: every comparison of a
signal against a plain number that makes a rule hold (`at_least` / `above`) is a warning at
that number (the rule's own severity, if higher), and every one inside an `escalate` block is
its escalation's severity; the lowest number per level wins, because that is where the first
rule starts to care. `FALLBACK` covers what no rule compares against a number (a rule may use
an expression, such as `0.95 * max_num_seqs`), and is used whole when no rules are loaded.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from vtop.model import Severity
from vtop.triage.schema import All, AnyOf, Compare, Cond, IfKnown, Not, Rule, Sample

SIGNALS = ("kv_usage", "preemptions", "waiting", "scrape_latency")
"""Signals the screen colours that the rules may judge."""


@dataclass(frozen=True, slots=True)
class Threshold:
    """`value >= warning` is WARNING, `value >= critical` CRITICAL (None: no such level)."""

    warning: float | None
    critical: float | None
    source: str
    text: str = ""
    """How the levels read ("warning above 0, critical at 1"); made from the numbers if empty."""

    def describe(self) -> str:
        if self.text:
            return self.text
        return ", ".join(
            f"{name} at {v:g}"
            for name, v in (("warning", self.warning), ("critical", self.critical))
            if v is not None
        )


FALLBACK: Mapping[str, Threshold] = MappingProxyType(
    {
        "kv_usage": Threshold(0.90, 0.98, "vLLM Grafana dashboard (orange 0.9, red 0.98)"),
        "preemptions": Threshold(0.001, 1.0, "vLLM Grafana dashboard (orange 0.001/s, red 1/s)"),
        "waiting": Threshold(1.0, None, "triage mnemonic: a queue above 0"),
        "running_of_cap": Threshold(1.0, None, "running at max_num_seqs: the batch cap binds"),
        "scrape_latency": Threshold(0.5, 2.0, "a starved API server answers late (vLLM CPU runs)"),
        "gpu_temp": Threshold(83.0, 90.0, "NVIDIA slowdown region of consumer cards"),
    }
)

Table = Mapping[str, Threshold]


def _compares(cond: Cond) -> Iterable[tuple[str, str, float]]:
    """(signal, op, number) of every plain-number comparison in a condition tree."""
    if isinstance(cond, Compare):
        operand = cond.measure.operand
        if operand is not None and isinstance(cond.threshold, int | float):
            yield operand.name, cond.op, float(cond.threshold)
        if cond.measure.sub is not None:
            yield from _compares(cond.measure.sub)
    elif isinstance(cond, Sample):
        if isinstance(cond.threshold, int | float):
            yield cond.operand.name, cond.op, float(cond.threshold)
    elif isinstance(cond, All | AnyOf):
        for item in cond.items:
            yield from _compares(item)
    elif isinstance(cond, IfKnown):
        yield from _compares(cond.item)
    elif isinstance(cond, Not):
        return  # a negated comparison marks where a rule stops caring, not where it starts


def from_rules(rules: Iterable[Rule]) -> dict[str, Threshold]:
    """Warning and critical levels per signal, as the rules set them."""
    found: dict[str, dict[Severity, tuple[float, str, str]]] = {}
    for rule in rules:
        checks = [(max(rule.severity, Severity.WARNING), rule.when)]
        checks += [(esc.severity, esc.when) for esc in rule.escalate]
        for severity, cond in checks:
            if severity < Severity.WARNING:
                continue
            for signal, op, number in _compares(cond):
                if signal not in SIGNALS or op not in ("at_least", "above"):
                    continue
                words = f"{'above' if op == 'above' else 'at'} {number:g}"
                if op == "above":
                    number = math.nextafter(number, math.inf)
                levels = found.setdefault(signal, {})
                if severity not in levels or number < levels[severity][0]:
                    levels[severity] = (number, rule.id, words)
    out: dict[str, Threshold] = {}
    for signal, levels in found.items():
        warn, crit = levels.get(Severity.WARNING), levels.get(Severity.CRITICAL)
        rules_named = sorted({x[1] for x in (warn, crit) if x is not None})
        text = ", ".join(
            f"{name} {x[2]}" for name, x in (("warning", warn), ("critical", crit)) if x is not None
        )
        out[signal] = Threshold(
            warn[0] if warn else None,
            crit[0] if crit else None,
            "rule " + ", ".join(rules_named),
            text,
        )
    return out


def table_for(rules: Iterable[Rule]) -> dict[str, Threshold]:
    """The fallback table overlaid with the rules' own levels."""
    return {**FALLBACK, **from_rules(rules)}


def level(name: str, value: float | None, table: Table = FALLBACK) -> Severity:
    """The severity of `value` for the threshold `name` (OK when unknown or unlisted)."""
    th = table.get(name)
    if th is None or value is None:
        return Severity.OK
    if th.critical is not None and value >= th.critical:
        return Severity.CRITICAL
    if th.warning is not None and value >= th.warning:
        return Severity.WARNING
    return Severity.OK
