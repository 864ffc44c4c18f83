"""The guarantees that hold whatever the rule files say.

Rule authors order root causes and declare what explains what, but a user's rule directory can
say anything; these checks run in code, after the rules, on every evaluation:

1. Never "raise" and "lower" (or "enable" and "disable") one knob at once. Advice is taken in
   root-cause order; a later finding's advice on a knob already advised is withheld, and the
   finding says by whom. One knob gets one value.
2. Never "raise max_num_seqs" while KV is the wall: a rule marked `kv_wall` is pending or
   firing, KV usage sits at or above 0.9 (vLLM's dashboard orange, llm-d's "may get
   preempted"), or requests are being preempted. The seed (§2.3.9): max_num_seqs is useless
   beyond what the KV pool holds. A finding whose only advice was that raise is suppressed,
   naming the wall.
"""

from __future__ import annotations

from dataclasses import replace

from vtop import knobs
from vtop.model import Finding, Recommendation
from vtop.triage.measure import Snapshot
from vtop.triage.schema import Measure, Operand

KV_WALL_WINDOW_S = 120.0
OPPOSITE = {"raise": "lower", "lower": "raise", "enable": "disable", "disable": "enable"}
_KV_P50 = Measure("quantile_over_time", Operand("kv_usage"), KV_WALL_WINDOW_S, 0.5)
_PREEMPTED = Measure("increase", Operand("preemptions"), KV_WALL_WINDOW_S)


def kv_wall(snap: Snapshot, findings: list[Finding], wall_rules: set[str]) -> str | None:
    """Why KV is the wall now (a rule id, or a short reason), or None if it is not."""
    for f in findings:
        if f.rule in wall_rules and f.state in ("pending", "insufficient", "firing", "suppressed"):
            return f.rule
    kv = snap.measure(_KV_P50)
    if kv is not None and kv >= knobs.KV_WALL:
        return f"KV usage p50 {kv:.0%} over 2 min"
    preempted = snap.measure(_PREEMPTED)
    if preempted is not None and preempted >= 1:
        return f"{preempted:.0f} preemptions in 2 min"
    return None


def _raises_seqs(rec: Recommendation) -> bool:
    return rec.knob == "max_num_seqs" and rec.direction == "raise"


def enforce(findings: list[Finding], wall: str | None) -> list[Finding]:
    """Apply both guarantees to findings already in root-cause order."""
    advised: dict[str, tuple[str, str]] = {}
    out: list[Finding] = []
    for f in findings:
        if f.state != "firing" or not f.recommendations:
            out.append(f)
            continue
        kept: list[Recommendation] = []
        notes: list[tuple[str, str]] = []
        blocked_by_wall = False
        for rec in f.recommendations:
            if wall is not None and _raises_seqs(rec):
                blocked_by_wall = True
                notes.append(("withheld", f"raise max_num_seqs: KV is the wall ({wall})"))
                continue
            prior = advised.get(rec.knob)
            if prior is not None:
                rule, direction = prior
                why = "opposite advice" if OPPOSITE.get(direction) == rec.direction else "advice"
                notes.append(
                    ("withheld", f"{rec.direction} {rec.knob}: {rule} gives {why} ({direction})")
                )
                continue
            advised[rec.knob] = (f.rule, rec.direction)
            kept.append(rec)
        if blocked_by_wall and not kept:
            by = wall if wall is not None and " " not in wall else "kv-wall"
            f = replace(
                f,
                state="suppressed",
                suppressed_by=by,
                recommendations=(),
                evidence=f.evidence + tuple(notes),
            )
        elif notes:
            f = replace(f, recommendations=tuple(kept), evidence=f.evidence + tuple(notes))
        out.append(f)
    return out
