"""What each scheduler panel shows, as plain values (no Textual here); the figures themselves
come from `vtop.figures`, which the fleet rows, `--once` and the report read too.

A panel is a `PanelSpec` (which signal, how to read it, how to print it), a `Reading` per
poll (the current value and its level), a `Summary` per completed chart bucket (the window's
statistics and a note: the batch cap, the KV pool, how often the queue was non-empty, the TTFT
queue/prefill split) and a `Trend` (the chart over fixed time buckets). Only the value moves at
the poll rate; everything else changes when a bucket completes, which keeps both the CPU spent
on window scans and the bytes sent to the terminal low.
The widgets only print these, so the numbers can be tested without a terminal and the same
code gives the per-engine breakdown (a `SeriesKey` with a model and an engine instead of the
aggregate).

"Current" means: a gauge's last poll; a counter's rate over the last 10 s; a histogram's
percentiles over the last minute. Window statistics are over the chosen window (`w`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from vtop import durations, figures, fmt
from vtop.model import ALL, Knob, SeriesKey, Severity
from vtop.signals.store import Store
from vtop.ui import chart as draw
from vtop.ui import trend
from vtop.ui.thresholds import FALLBACK, Table, level

PanelKind = Literal["gauge", "rate", "latency"]


@dataclass(frozen=True, slots=True)
class PanelSpec:
    """One panel: `signal` is the catalog name; `label` the series label (ALL: every value)."""

    id: str
    title: str
    short: str
    signal: str
    kind: PanelKind
    unit: str
    label: str = ""
    ratio: bool = False
    """Values are 0..1 shown as percent; the chart's scale is fixed at 1."""
    related: tuple[str, ...] = ()
    """Other catalog signals the explain screen describes with this one."""


PANELS: tuple[PanelSpec, ...] = (
    PanelSpec("running", "Running", "running", "running", "gauge", "req"),
    PanelSpec(
        "waiting", "Waiting", "waiting", "waiting", "gauge", "req", related=("waiting_by_reason",)
    ),
    PanelSpec("kv", "KV cache", "KV cache", "kv_usage", "gauge", "", ratio=True),
    PanelSpec("preemptions", "Preemptions", "preempt", "preemptions", "rate", "/s"),
    PanelSpec(
        "prompt",
        "Prompt tokens",
        "prompt",
        "prompt_tokens",
        "rate",
        "tok/s",
        related=("prefix_cache_hits", "prefix_cache_queries"),
    ),
    PanelSpec("generation", "Generation tokens", "gen", "generation_tokens", "rate", "tok/s"),
    PanelSpec(
        "ttft",
        "Time to first token",
        "TTFT",
        "ttft",
        "latency",
        "",
        related=("queue_time", "prefill_time"),
    ),
    PanelSpec("itl", "Inter-token latency", "ITL", "itl", "latency", ""),
    PanelSpec(
        "finished", "Finished requests", "done", "requests_finished", "rate", "req/s", label=ALL
    ),
)

BY_ID = {p.id: p for p in PANELS}


@dataclass(frozen=True, slots=True)
class View:
    """What a panel is computed from: one endpoint's store, its knobs, the window, the scope."""

    store: Store
    knobs: Mapping[str, Knob]
    window_s: float
    interval_s: float
    model: str = ALL
    engine: str = ALL
    thresholds: Table = field(default_factory=lambda: FALLBACK)
    """The levels that colour values: the rules' own (`thresholds.table_for`)."""

    def key(self, signal: str, label: str = "") -> SeriesKey:
        return SeriesKey(signal, self.model, self.engine, label)

    @property
    def scope(self) -> figures.Scope:
        return figures.Scope(self.model, self.engine)

    @property
    def rate_span_s(self) -> float:
        """The span of a "current" rate at this view's poll interval (`figures.rate_span`)."""
        return figures.rate_span(self.interval_s)

    @property
    def window_label(self) -> str:
        """The window as the data fills it: "1h" once an hour is held, "30s" after 30 s (a
        share "of 1h" over 30 s of polls would claim an hour it never saw)."""
        times = self.store.times(self.window_s)
        held = times[-1] - times[0] if len(times) > 1 else 0.0
        if held >= self.window_s - self.interval_s:
            return durations.exact(self.window_s)
        return durations.exact(max(1.0, round(held)))


@dataclass(frozen=True, slots=True)
class Reading:
    """A panel's current value, computed every poll: cheap, and the only text that moves at
    the poll rate."""

    value: str
    level: Severity


@dataclass(frozen=True, slots=True)
class Summary:
    """A panel's window text (statistics and a note), computed when a chart bucket completes,
    so it repaints with the chart rather than on every poll. Empty: nothing to say.

    Each has shorter forms, shortest last, for a narrow row or box: a field too narrow for
    the full text shows the longest form that fits (`room.fitting`), fewer words rather than a
    word cut in half (`cap: max_num_seqs (defaul…` was the running panel at 80 columns)."""

    stats: str
    note: str = ""
    stats_short: tuple[str, ...] = ()
    note_short: tuple[str, ...] = ()

    @property
    def stats_forms(self) -> tuple[str, ...]:
        return (self.stats, *self.stats_short)

    @property
    def note_forms(self) -> tuple[str, ...]:
        return (self.note, *self.note_short)


def read(spec: PanelSpec, v: View) -> Reading:
    """The panel's value now."""
    s, k = v.store, v.key(spec.signal, spec.label)
    if spec.kind == "gauge":
        last = figures.gauge(s, k)
        value = (fmt.pct if spec.ratio else fmt.num)(last)
        lvl = level(spec.signal, last, v.thresholds)
        if spec.id == "running":
            cap = figures.cap(v.knobs)
            if cap is not None:
                value = f"{value} / {fmt.num(cap.value)}"
                if last is not None:
                    lvl = max(lvl, level("running_of_cap", last / cap.value, v.thresholds))
        return Reading(value, lvl)
    if spec.kind == "rate":
        now = figures.rate(s, k, v.rate_span_s)
        return Reading(fmt.num(now), level(spec.signal, now, v.thresholds))
    # One histogram delta for both percentiles.
    recent = figures.latency(s, k, min(figures.LATENCY_SPAN_S, v.window_s))
    p50, p99 = recent.p50, recent.p99
    return Reading(
        f"p50 {fmt.seconds(p50)} p99 {fmt.seconds(p99)}", level(spec.signal, p99, v.thresholds)
    )


def summarize(spec: PanelSpec, v: View) -> Summary:
    """The panel's window statistics and note."""
    if spec.kind == "gauge":
        return _gauge_summary(spec, v)
    if spec.kind == "rate":
        return _rate_summary(spec, v)
    return _latency_summary(spec, v)


def _gauge_summary(spec: PanelSpec, v: View) -> Summary:
    s, k, w = v.store, v.key(spec.signal, spec.label), v.window_s
    show = fmt.pct if spec.ratio else fmt.num
    g = figures.gauge_window(s, k, w)
    spread = f"avg {show(g.avg)}  min {show(g.min)}  max {show(g.max)}"
    stats = (f"{v.window_label} {spread}", spread, f"avg {show(g.avg)}  max {show(g.max)}")
    note: tuple[str, ...] = ("",)
    if spec.id == "running":
        cap = figures.cap(v.knobs)
        if cap is not None and cap.knob.assumed:
            provenance = cap.knob.provenance
            note = (f"cap: max_num_seqs ({provenance}, assumed)", "max_num_seqs (assumed)")
        elif cap is not None:
            note = ("cap: max_num_seqs",)
    elif spec.id == "kv":
        pool = figures.cap(v.knobs, "kv_capacity_tokens")
        if pool is not None:
            note = (f"pool of {fmt.num(pool.value)} tokens",)
        if (g.max is not None and g.max > 1.0) or (g.min is not None and g.min < 0.0):
            note = ("values out of 0..1: engine bug?", "out of 0..1: engine bug?")
    elif spec.id == "waiting":
        share = figures.busy_share(s, k, w)
        if share is not None:
            pct = f"{share * 100:.0f}%"
            note = (
                f"queue non-empty {pct} of {v.window_label}",
                f"queued {pct} of {v.window_label}",
            )
    return Summary(stats[0], note[0], stats[1:], note[1:])


def _rate_summary(spec: PanelSpec, v: View) -> Summary:
    s, k, w = v.store, v.key(spec.signal, spec.label), v.window_s
    c = figures.counter_window(s, k, w)
    avg = c.per_s
    spread = f"avg {fmt.num(avg)}  total {fmt.num(c.total)}"
    stats = (f"{v.window_label} {spread}", spread, f"avg {fmt.num(avg)}")
    note: tuple[str, ...] = ("",)
    if spec.id == "prompt":
        hit = figures.prefix_hit_ratio(s, v.scope, w)
        if hit is not None:
            note = (f"prefix cache hit {fmt.pct(hit)}", f"prefix hit {fmt.pct(hit)}")
    elif spec.id == "finished" and avg:
        parts = [
            f"{reason} {fmt.pct(r / avg)}"
            for r, reason in figures.by_label(s, v.scope, spec.signal, w)[:3]
        ]
        note = tuple("  ".join(parts[:n]) for n in range(len(parts), 0, -1)) or ("",)
    return Summary(stats[0], note[0], stats[1:], note[1:])


def _latency_summary(spec: PanelSpec, v: View) -> Summary:
    s, k, w = v.store, v.key(spec.signal), v.window_s
    window = figures.latency(s, k, w)
    spread = f"p50 {fmt.seconds(window.p50)}  p99 {fmt.seconds(window.p99)}"
    stats = (f"{v.window_label} {spread}", spread, f"p99 {fmt.seconds(window.p99)}")
    note: tuple[str, ...] = ("",)
    if spec.id == "ttft":
        split = figures.ttft_split(s, v.scope, w)
        if split is not None:
            queue = f"queue {fmt.seconds(split.queue_s)}"
            share = f"({split.queue_share * 100:.0f}%)"
            prefill = f"prefill {fmt.seconds(split.prefill_s)}"
            # The share says where the time goes; the prefill's own time is the first to go.
            note = (f"{queue} {share}  {prefill}", f"{queue} {share}")
    elif spec.id == "itl":
        tpot = figures.latency(s, v.key("tpot"), w).mean
        if tpot is not None:
            note = (f"mean per request {fmt.seconds(tpot)}", f"per request {fmt.seconds(tpot)}")
    return Summary(stats[0], note[0], stats[1:], note[1:])


@dataclass(frozen=True, slots=True)
class Trend:
    """A panel's chart: bucket values oldest first, its scale, and restart cells."""

    values: tuple[float | None, ...]
    top: float
    restarts: tuple[int, ...]
    buckets: trend.Buckets


def trend_of(spec: PanelSpec, v: View, cells: int) -> Trend | None:
    """The panel's chart over `cells` buckets ending at the last completed bucket."""
    s = v.store
    now = s.now
    if now is None or cells <= 0:
        return None
    bucket_s = trend.bucket_seconds(v.window_s, cells, v.interval_s)
    b = trend.Buckets.at(now, bucket_s, cells)
    span = now - b.edges[0] + bucket_s
    times = s.times(span)
    k = v.key(spec.signal, spec.label)
    values: list[float | None]
    if spec.kind == "gauge":
        values = trend.gauge(times, s.values(k, span), b)
    elif spec.kind == "rate":
        values = trend.rate(times, s.values(k, span), b)
    else:
        values = trend.quantile(times, s.hist_values(k, span), b, 0.99)
    floor: float | None = 1.0 if spec.ratio else None
    if spec.id == "running":
        cap = figures.cap(v.knobs)
        known = [x for x in values if x is not None]
        if cap is not None and known and max(known) >= 0.5 * cap.value:
            floor = cap.value  # draw against the cap once the batch comes near it
    top = 1.0 if spec.ratio else draw.scale_max(values, floor)
    marks = tuple(c for c in (b.cell_of(t) for t in s.restarts()) if c is not None)
    return Trend(tuple(values), top, marks, b)
