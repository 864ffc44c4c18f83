"""One compact line per endpoint, for `vtop --url A --url B …` (no Textual here).

Each line carries what tells endpoints apart at a glance: the connection, running against the
cap, the queue, KV usage, generation throughput and the worst firing finding. The panels
below show the one selected.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vtop.model import Finding, Severity
from vtop.monitor import EndpointView
from vtop.ui import fmt
from vtop.ui.headline import HEALTHY, short_url
from vtop.ui.verdict import LABELS, order


@dataclass(frozen=True, slots=True)
class Row:
    endpoint: str
    name: str
    up: bool
    figures: str
    verdict: str
    severity: Severity


def row(view: EndpointView, findings: Sequence[Finding] | None, status: str) -> Row:
    s = view.store
    cap = view.knobs.get("max_num_seqs")
    running = fmt.num(s.last("running"))
    if cap is not None and isinstance(cap.value, int):
        running += f"/{cap.value}"
    figures = (f"run {running:>8}  wait {fmt.num(s.last('waiting')):>5}  "
               f"KV {fmt.pct(s.last('kv_usage')):>6}  "
               f"gen {fmt.num(s.per_second('generation_tokens', 5.0)):>6} tok/s")  # fmt: skip
    firing = [f for f in order(findings or ()) if f.state == "firing"]
    up = status in HEALTHY or status.startswith("replay")
    if not up:
        verdict, sev = status, Severity.CRITICAL
    elif firing:
        worst = firing[0]
        verdict, sev = f"{LABELS[worst.severity]} {worst.title}", worst.severity
        if len(firing) > 1:
            verdict += f" (+{len(firing) - 1})"
    else:
        verdict, sev = "OK", Severity.OK
    return Row(s.endpoint, short_url(s.endpoint), up, figures, verdict, sev)
