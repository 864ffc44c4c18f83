"""A stand-in rule for report tests: findings the way the triage engine hands them over.

The report must carry findings (severity, evidence, recommendations with their knobs) from the
monitor to every format and to the exit code; this one rule, computed from the monitor's own
store, lets those paths be tested before (and independently of) the shipped rules.
"""

from __future__ import annotations

from vtop.model import Finding, Recommendation, Severity
from vtop.monitor import Monitor


def kv_full(monitor: Monitor) -> list[Finding]:
    """CRITICAL while KV usage averaged over 20 s is at least 0.85."""
    out = []
    for url, view in monitor.endpoints.items():
        avg = view.store.avg("kv_usage", 20.0)
        if avg is None or avg < 0.85:
            continue
        util = view.knobs.get("gpu_memory_utilization")
        rec = Recommendation(
            knob="gpu_memory_utilization",
            current=util,
            new_value=0.95,
            direction="raise",
            formula="0.9 + 0.05 while the GPU has headroom",
            inputs={"kv_usage": avg},
        )
        out.append(
            Finding(
                rule="kv-cache-full",
                title="KV cache is the wall",
                endpoint=url,
                severity=Severity.CRITICAL,
                state="firing",
                summary=f"KV cache {avg:.0%} full over 20 s; requests wait for blocks",
                evidence=(("kv_usage avg 20 s", f"{avg:.3f}"), ("threshold", "0.85")),
                recommendations=(rec,),
            )
        )
    return out
