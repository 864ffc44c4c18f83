"""A finding's detail as text: evidence, rule, each recommendation's formula and its inputs
with where every input came from (no Textual here).

Provenance is the point: a recommendation computed from `max_num_seqs 256 (default, assumed)`
deserves less trust than one computed from the server's command line, and the screen says
which it is.
"""

from __future__ import annotations

from collections.abc import Mapping

from vtop.model import Finding, Knob, Recommendation, format_value
from vtop.ui import fmt
from vtop.ui.verdict import LABELS

PROVENANCE = {
    "metrics": "read from the server",
    "process": "read from the server's command line",
    "flag": "given to vtop",
    "inferred": "inferred from behaviour",
    "default": "version default, assumed",
}


def knob_text(k: Knob) -> str:
    """`256 (version default, assumed: vLLM 0.32 default, GPUs under 70 GiB)`."""
    where = PROVENANCE.get(k.provenance, k.provenance)
    detail = f": {k.detail}" if k.detail else ""
    return f"{format_value(k.value)} ({where}{detail})"


def _input(v: Knob | float | None) -> str:
    if v is None:
        return fmt.DASH + " (unknown)"
    if isinstance(v, Knob):
        return knob_text(v)
    return fmt.num(v, digits=4)


def recommendation_lines(r: Recommendation) -> list[str]:
    out = [f"  {r.flag}    ({r.direction} {r.knob}; confidence {r.confidence})"]
    out.append(f"    current   {knob_text(r.current) if r.current else fmt.DASH + ' (unknown)'}")
    out.append(f"    formula   {r.formula}")
    for name, value in _sorted(r.inputs):
        out.append(f"      {name} = {_input(value)}")
    if r.tradeoff:
        out.append(f"    tradeoff  {r.tradeoff}")
    return out


def _sorted(inputs: Mapping[str, Knob | float | None]) -> list[tuple[str, Knob | float | None]]:
    return sorted(inputs.items())


def lines(f: Finding, now: float | None = None) -> list[str]:
    """The detail screen's text, one string per line."""
    out = [f"{LABELS[f.severity]}  {f.state}  {f.title}", f"rule {f.rule}  ·  {f.endpoint}", ""]
    out.append(f.summary)
    if f.state == "pending":
        out.append(f"holding for {f.held_s:.0f} of {f.for_s:.0f} s before it fires")
    elif f.for_s:
        out.append(f"held {f.held_s:.0f} s (the rule waits {f.for_s:.0f} s before firing)")
    if f.since is not None and now is not None:
        out.append(f"since {fmt.duration(now - f.since)} ago")
    if f.suppressed_by:
        out.append(f"suppressed: explained by {f.suppressed_by}, so it gives no advice")
    out += ["", "Evidence"]
    out += [f"  {name:<28} {value}" for name, value in f.evidence] or ["  (none recorded)"]
    out += ["", "Recommendations"]
    if f.recommendations:
        for r in f.recommendations:
            out += recommendation_lines(r)
    else:
        out.append("  no flag change")
    return out
