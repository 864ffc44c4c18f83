"""What each scheduler panel shows, computed from the store as plain values (no Textual here).

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

from vtop import durations, fmt
from vtop.model import ALL, Knob, SeriesKey, Severity
from vtop.signals import histogram as hist
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
    PanelSpec("waiting", "Waiting", "waiting", "waiting", "gauge", "req",
              related=("waiting_by_reason",)),
    PanelSpec("kv", "KV cache", "KV cache", "kv_usage", "gauge", "", ratio=True),
    PanelSpec("preemptions", "Preemptions", "preempt", "preemptions", "rate", "/s"),
    PanelSpec("prompt", "Prompt tokens", "prompt", "prompt_tokens", "rate", "tok/s",
              related=("prefix_cache_hits", "prefix_cache_queries")),
    PanelSpec("generation", "Generation tokens", "gen", "generation_tokens", "rate", "tok/s"),
    PanelSpec("ttft", "Time to first token", "TTFT", "ttft", "latency", "",
              related=("queue_time", "prefill_time")),
    PanelSpec("itl", "Inter-token latency", "ITL", "itl", "latency", ""),
    PanelSpec("finished", "Finished requests", "done", "requests_finished", "rate", "req/s",
              label=ALL),
)  # fmt: skip

BY_ID = {p.id: p for p in PANELS}

RECENT_S = 60.0
"""The span of "current" latency percentiles."""


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
    def recent_s(self) -> float:
        return recent_span(self.interval_s)


def recent_span(interval_s: float) -> float:
    """The span of a counter's "current" rate: 10 s (vLLM's own log line averages over the
    same span), or three polls when polls are slower. Shorter spans only add jitter, and every
    jitter is a repaint."""
    return max(10.0, 3.0 * interval_s)


@dataclass(frozen=True, slots=True)
class Reading:
    """A panel's current value, computed every poll: cheap, and the only text that moves at
    the poll rate."""

    value: str
    level: Severity


@dataclass(frozen=True, slots=True)
class Summary:
    """A panel's window text (statistics and a note), computed when a chart bucket completes,
    so it repaints with the chart rather than on every poll. Empty: nothing to say."""

    stats: str
    note: str = ""


def _cap(knobs: Mapping[str, Knob], name: str) -> tuple[float | None, Knob | None]:
    knob = knobs.get(name)
    if knob is None or not isinstance(knob.value, int | float) or isinstance(knob.value, bool):
        return None, None
    return float(knob.value), knob


def read(spec: PanelSpec, v: View) -> Reading:
    """The panel's value now."""
    s, k = v.store, v.key(spec.signal, spec.label)
    if spec.kind == "gauge":
        last = s.last(k)
        value = (fmt.pct if spec.ratio else fmt.num)(last)
        lvl = level(spec.signal, last, v.thresholds)
        if spec.id == "running":
            cap, _ = _cap(v.knobs, "max_num_seqs")
            if cap is not None:
                value = f"{value} / {fmt.num(cap)}"
                if last is not None:
                    lvl = max(lvl, level("running_of_cap", last / cap, v.thresholds))
        return Reading(value, lvl)
    if spec.kind == "rate":
        now = s.per_second(k, v.recent_s)
        return Reading(fmt.num(now), level(spec.signal, now, v.thresholds))
    recent = s.hist_delta(k, min(RECENT_S, v.window_s))  # once for both percentiles
    p50, p99 = hist.quantile(0.5, recent), hist.quantile(0.99, recent)
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
    stats = (f"{durations.exact(w)} avg {show(s.avg(k, w))}  min {show(s.min(k, w))}  "
             f"max {show(s.max(k, w))}")  # fmt: skip
    note = ""
    if spec.id == "running":
        _, knob = _cap(v.knobs, "max_num_seqs")
        if knob is not None:
            note = "cap: max_num_seqs" + (f" ({knob.provenance}, assumed)" if knob.assumed else "")
    elif spec.id == "kv":
        cap, _ = _cap(v.knobs, "kv_capacity_tokens")
        if cap is not None:
            note = f"pool of {fmt.num(cap)} tokens"
        top = s.max(k, w)
        low = s.min(k, w)
        if (top is not None and top > 1.0) or (low is not None and low < 0.0):
            note = "values out of 0..1: engine bug?"
    elif spec.id == "waiting":
        queued = [x for x in s.values(k, w) if x is not None]
        if queued:
            share = sum(1 for x in queued if x > 0) / len(queued)
            note = f"queue non-empty {share * 100:.0f}% of {durations.exact(w)}"
    return Summary(stats, note)


def _rate_summary(spec: PanelSpec, v: View) -> Summary:
    s, k, w = v.store, v.key(spec.signal, spec.label), v.window_s
    avg = s.per_second(k, w)
    stats = f"{durations.exact(w)} avg {fmt.num(avg)}  total {fmt.num(s.last(k))}"
    note = ""
    if spec.id == "prompt":
        hits = s.per_second(v.key("prefix_cache_hits"), w)
        queries = s.per_second(v.key("prefix_cache_queries"), w)
        if hits is not None and queries:
            note = f"prefix cache hit {fmt.pct(hits / queries)}"
    elif spec.id == "finished" and avg:
        parts = []
        for reason in s.labels(spec.signal):
            r = s.per_second(v.key(spec.signal, reason), w)
            if r:
                parts.append((r, reason))
        parts.sort(reverse=True)
        note = "  ".join(f"{reason} {fmt.pct(r / avg)}" for r, reason in parts[:3])
    return Summary(stats, note)


def _latency_summary(spec: PanelSpec, v: View) -> Summary:
    s, k, w = v.store, v.key(spec.signal), v.window_s
    stats = (f"{durations.exact(w)} p50 {fmt.seconds(s.hist_quantile(0.5, k, w))}  "
             f"p99 {fmt.seconds(s.hist_quantile(0.99, k, w))}")  # fmt: skip
    note = ""
    if spec.id == "ttft":
        queue = s.hist_mean(v.key("queue_time"), w)
        prefill = s.hist_mean(v.key("prefill_time"), w)
        if queue is not None and prefill is not None and queue + prefill > 0:
            share = queue / (queue + prefill)
            note = (f"queue {fmt.seconds(queue)} ({share * 100:.0f}%)  "
                    f"prefill {fmt.seconds(prefill)}")  # fmt: skip
    elif spec.id == "itl":
        tpot = s.hist_mean(v.key("tpot"), w)
        if tpot is not None:
            note = f"mean per request {fmt.seconds(tpot)}"
    return Summary(stats, note)


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
        cap, _ = _cap(v.knobs, "max_num_seqs")
        known = [x for x in values if x is not None]
        if cap is not None and known and max(known) >= 0.5 * cap:
            floor = cap  # draw against the cap once the batch comes near it
    top = 1.0 if spec.ratio else draw.scale_max(values, floor)
    marks = tuple(c for c in (b.cell_of(t) for t in s.restarts()) if c is not None)
    return Trend(tuple(values), top, marks, b)
