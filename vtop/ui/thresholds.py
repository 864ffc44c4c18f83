"""The levels at which a value on screen turns warning or critical: one small table.

The triage rules carry their own thresholds; the screen must colour a value by the same
numbers the rules judge it by, never by separate magic numbers. Until the rule engine exposes
its thresholds, they live here, in one table, each with where it comes from; switching to the
rules' own values means replacing `THRESHOLDS` and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

from vtop.model import Severity


@dataclass(frozen=True, slots=True)
class Threshold:
    """`value >= warning` is WARNING, `value >= critical` CRITICAL (None: no such level)."""

    warning: float | None
    critical: float | None
    source: str


THRESHOLDS: dict[str, Threshold] = {
    "kv_usage": Threshold(0.90, 0.98, "vLLM Grafana dashboard (orange 0.9, red 0.98)"),
    "preemptions": Threshold(0.001, 1.0, "vLLM Grafana dashboard (orange 0.001/s, red 1/s)"),
    "waiting": Threshold(1.0, None, "triage mnemonic: a queue above 0"),
    "running_of_cap": Threshold(1.0, None, "running at max_num_seqs: the batch cap binds"),
    "scrape_latency": Threshold(0.5, 2.0, "a starved API server answers late (vLLM CPU runs)"),
    "gpu_temp": Threshold(83.0, 90.0, "NVIDIA slowdown region of consumer cards"),
}


def level(name: str, value: float | None) -> Severity:
    """The severity of `value` for the threshold `name` (OK when unknown or unlisted)."""
    th = THRESHOLDS.get(name)
    if th is None or value is None:
        return Severity.OK
    if th.critical is not None and value >= th.critical:
        return Severity.CRITICAL
    if th.warning is not None and value >= th.warning:
        return Severity.WARNING
    return Severity.OK
