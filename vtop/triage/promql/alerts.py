"""Whole rules as Prometheus alerting rules, and their `explains` as Alertmanager inhibits.

A rule becomes one alert named after it (`memory-ceiling` -> `VtopMemoryCeiling`), labelled
with its severity and `vtop_rule`. The recovery thresholds (Grafana-style hysteresis) use
Prometheus's own alert state: `fire-condition or (clear-condition and on(job, instance)
ALERTS{alertname=…})`, which is exactly vtop's "while pending or firing, compare against the
clear level". `for` and `keep_firing_for` carry over as they are (Prometheus >= 2.42); an
escalation is a second alert of the same name with severity critical, and the fast path
(`decisive`) a third with `vtop_path: decisive`. `explains` becomes inhibit rules, which is
what Alertmanager has for root causes.

What vtop does that Prometheus cannot is said in annotations rather than faked: `requires`
(vtop's "not enough data yet"), windows clamped at a server restart, the branches of a
condition left out, and the kv-wall guard on advice. A rule that cannot be translated at all
is returned in `Exported.skipped` with the reason; nothing here prints or writes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from vtop import durations
from vtop.model import Severity
from vtop.sources.promql import quote
from vtop.triage.engine import MIN_DECISIVE_POLLS
from vtop.triage.promql.conditions import Translator, has_clear
from vtop.triage.promql.terms import NotExpressible, Options
from vtop.triage.schema import Rule


@dataclass(slots=True)
class Exported:
    """The alerting rules, and the rules that could not be exported, with why."""

    alerts: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    inhibits: list[dict[str, Any]] = field(default_factory=list)
    group: str = "vtop"
    interval: str | None = None


def alert_name(rule_id: str) -> str:
    """`memory-ceiling` -> `VtopMemoryCeiling`."""
    return "Vtop" + "".join(part.capitalize() for part in rule_id.split("-"))


def _severity(s: Severity) -> str:
    return s.name.lower()


def export(rules: Iterable[Rule], options: Options | None = None) -> Exported:
    """Every rule that PromQL can express as alerting rules; the others with the reason."""
    o = options or Options()
    out = Exported(group=o.group, interval=o.interval)
    ordered = sorted(rules, key=lambda r: (r.order, r.id))
    for rule in ordered:
        try:
            out.alerts.extend(_rule(rule, o))
        except NotExpressible as exc:
            out.skipped.append((rule.id, str(exc)))
    exported = {a["labels"]["vtop_rule"] for a in out.alerts}
    for rule in ordered:
        targets = [r for r in rule.explains if r in exported]
        if rule.id in exported and targets:
            out.inhibits.append(
                {
                    "source_matchers": [f'vtop_rule="{rule.id}"'],
                    "target_matchers": [f'vtop_rule=~"{"|".join(targets)}"'],
                    "equal": list(o.by),
                }
            )
        if rule.id in exported and rule.escalate:
            out.inhibits.append(
                {
                    "source_matchers": [f'vtop_rule="{rule.id}"', 'severity="critical"'],
                    "target_matchers": [
                        f'vtop_rule="{rule.id}"',
                        f'severity="{_severity(rule.severity)}"',
                    ],
                    "equal": list(o.by),
                }
            )
    return out


def _rule(rule: Rule, o: Options) -> list[dict[str, Any]]:
    tr = Translator(rule, o)
    name = alert_name(rule.id)
    sev = _severity(rule.severity)
    expr = tr.cond(rule.when, active=False)
    if has_clear(rule.when):
        state = (
            f"ALERTS{{alertname={quote(name)}, vtop_rule={quote(rule.id)}, severity={quote(sev)}}}"
        )
        expr = f"{expr}\nor\n(\n{tr.cond(rule.when, active=True)}\nand on ({tr.by}) {state}\n)"
    fast = _decisive(rule, tr)
    annotations = _annotations(rule, tr)
    base: dict[str, Any] = {"alert": name, "expr": expr}
    if rule.for_s:
        base["for"] = durations.exact(rule.for_s)
    if rule.keep_firing_for_s:
        base["keep_firing_for"] = durations.exact(rule.keep_firing_for_s)
    base["labels"] = {"severity": sev, "vtop_rule": rule.id}
    base["annotations"] = annotations
    alerts = [base]
    for esc in rule.escalate:
        esc_expr = f"(\n{expr}\n)\nand\n({tr.cond(esc.when, active=False)})"
        alert = dict(base, expr=esc_expr)
        alert["labels"] = {"severity": _severity(esc.severity), "vtop_rule": rule.id}
        alerts.append(alert)
    if fast is not None:
        alert = {"alert": name, "expr": fast}
        if rule.keep_firing_for_s:
            alert["keep_firing_for"] = durations.exact(rule.keep_firing_for_s)
        alert["labels"] = {"severity": sev, "vtop_rule": rule.id, "vtop_path": "decisive"}
        alert["annotations"] = annotations
        alerts.append(alert)
    return alerts


def _decisive(rule: Rule, tr: Translator) -> str | None:
    """The fast path as an alert of its own (same name, `vtop_path: decisive`, no `for`: its
    windows say how long): where the decisive condition and the rule's own hold, over at least
    `MIN_DECISIVE_POLLS` scrapes of the evidence span. None where PromQL cannot say it."""
    if rule.decisive is None:
        return None
    try:
        fast = tr.cond(rule.decisive.when, active=False)
        main = tr.cond(rule.when, active=False)
    except NotExpressible as exc:
        tr.partial.setdefault(f"the fast path: {exc}", None)
        return None
    span = tr.range_selector(rule.decisive.evidence_s)
    samples = f"max by ({tr.by}) (count_over_time(up{span})) >= {MIN_DECISIVE_POLLS}"
    return f"(\n{fast}\n)\nand on ({tr.by})\n(\n{main}\n)\nand on ({tr.by})\n({samples})"


def _annotations(rule: Rule, tr: Translator) -> dict[str, str]:
    ann = {
        "summary": "{{ $labels.instance }}: " + rule.title,
        "description": " ".join(rule.description.split()),
        "vtop_summary": " ".join(rule.summary.split()),
    }
    for i, spec in enumerate(rule.recommend, 1):
        said, promql, why = tr.recommendation(spec)
        key = f"recommend_{i}_{spec.knob}"
        ann[key] = said
        if promql is not None:
            ann[key + "_promql"] = promql
        elif why is not None:
            ann[key + "_promql"] = f"(computed by vtop only: {why})"
    if tr.knobs_used:
        ann["vtop_knobs"] = "; ".join(tr.knobs_used[k] for k in sorted(tr.knobs_used))
    req = rule.requires
    ann["vtop_requires"] = (
        f"vtop waits for {durations.exact(req.evidence_s)} of evidence"
        + (f" and {req.finished} finished requests" if req.finished else "")
        + " before this rule may fire; here Prometheus's own history and `for` stand in"
    )
    if rule.decisive is not None:
        ann["vtop_decisive"] = (
            f"fast path: a second alert of this name (vtop_path=decisive) fires on decisive "
            f"evidence across {durations.exact(rule.decisive.evidence_s)}, as vtop does"
        )
    if tr.partial:
        ann["vtop_partial"] = "vtop also fires where PromQL cannot look: " + "; ".join(tr.partial)
    if rule.explains:
        ann["vtop_explains"] = (
            "root cause of "
            + ", ".join(rule.explains)
            + " (Alertmanager inhibit rules: vtop rules export "
            "--format alertmanager)"
        )
    if rule.source:
        ann["source"] = " ".join(rule.source.split())
    return ann
