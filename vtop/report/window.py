"""Statistics over a whole report window, streamed poll by poll in constant memory.

The `Store` answers windowed questions over its bounded history; a report window can be a day,
longer than any history worth keeping, and its numbers must use every poll even when rules are
evaluated at a coarser cadence. So the report keeps its own running figures, per endpoint:

- gauges (running, waiting, KV usage: `vtop.figures.GAUGES`, as every view names them): count,
  sum, min, max and last over every poll that saw them, models and engines combined by the
  catalog's rule (sum, or max for KV usage);
- counters as per-second rates: `avg` is the window's total (reset-adjusted) increase over its
  duration; `max` and `last` are over consecutive `RATE_BUCKET_S` buckets (the last one
  taking in the window's tail), so a one-poll blip is not a peak, the figures do not depend
  on the window's length, and `avg` never exceeds `max`;
- latency histograms (`vtop.figures.LATENCIES`): the reset-adjusted cumulative buckets at
  the window's start and end, whose difference gives the window's percentiles exactly as
  `histogram_quantile` would (read as `vtop.figures.Latency`, as the panels and `--once` read
  theirs);
- a `Timeline` of the primary signals in at most 2 × `BINS` time bins, merged pairwise as the
  window grows, for sparklines and charts.

Resets are `vtop.signals.resets`' rule; the restarts counted are those of the rate counters
(see there why not the store's). Missing stays missing: a signal no poll saw is `None`, never 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import get_args

from vtop import figures
from vtop.figures import GAUGES, LATENCIES, RATES
from vtop.model import Frame, GpuStatus, Histogram, Scrape, SeriesKey
from vtop.report.document import TimelineName
from vtop.signals import gpus, resets
from vtop.signals import histogram as hist
from vtop.signals.catalog import BY_NAME
from vtop.sources.live import is_local

LIGHT = frozenset((*GAUGES, *RATES.values()))
"""What a light frame must keep for the per-poll figures. Latency comes from the cumulative
histograms of the complete frames, which are enough: its window figures need only the first
and the last, and the timeline one per bin."""
RATE_BUCKET_S = 10.0
BINS = 60
CHART: tuple[str, ...] = get_args(TimelineName)
"""The figures the timeline has a series of (the document's `TimelineName`), in order."""


@dataclass(slots=True)
class Stat:
    n: int = 0
    total: float = 0.0
    lo: float = math.inf
    hi: float = -math.inf
    last: float | None = None

    def add(self, v: float) -> None:
        self.n += 1
        self.total += v
        self.lo = min(self.lo, v)
        self.hi = max(self.hi, v)
        self.last = v

    def summary(self) -> dict[str, float | None]:
        if not self.n:
            return {"avg": None, "min": None, "max": None, "last": None}
        return {"avg": self.total / self.n, "min": self.lo, "max": self.hi, "last": self.last}


@dataclass(slots=True)
class Counter:
    """A counter combined over series, reset-adjusted, with bucketed rates.

    The buckets partition the window: closed ones of at least `RATE_BUCKET_S` each, then the
    open tail since the last one closed. The tail is merged into the last closed bucket (the
    latest stretch of at least `RATE_BUCKET_S`) for `last` and `max`, so the partition still
    covers the whole window: `avg`, the window's increase over its duration, is a weighted
    mean of the parts' rates and can never exceed `max`, nor `last` exceed it. (Leaving the
    tail out let a busier last few seconds raise `avg` above every bucket's rate:
    `requests finished/s 1.97 avg, 1.82 max`.)
    """

    raw: dict[SeriesKey, float] = field(default_factory=dict)
    offset: dict[SeriesKey, float] = field(default_factory=dict)
    first: tuple[float, float] | None = None
    now: tuple[float, float] | None = None
    bucket: tuple[float, float] | None = None
    """Start of the open bucket (the tail)."""
    closed: tuple[float, float] | None = None
    """Start of the last closed bucket, which the tail merges into."""
    peak_before: float | None = None
    """The highest rate of the closed buckets before the last one."""
    resets: int = 0

    def add(self, t: float, values: list[tuple[SeriesKey, float]]) -> None:
        total = 0.0
        reset = False
        for k, v in values:
            old = self.raw.get(k)
            if old is not None and resets.counter_reset(old, v):
                self.offset[k] = self.offset.get(k, 0.0) + old
                reset = True
            self.raw[k] = v
        self.resets += reset
        for k, v in self.raw.items():
            total += v + self.offset.get(k, 0.0)
        self.now = (t, total)
        if self.first is None:
            self.first = self.bucket = (t, total)
            return
        assert self.bucket is not None
        bt, bv = self.bucket
        if t - bt >= RATE_BUCKET_S:
            if self.closed is not None:
                ct, cv = self.closed
                rate = (bv - cv) / (bt - ct)
                self.peak_before = rate if self.peak_before is None else max(self.peak_before, rate)
            self.closed = self.bucket
            self.bucket = (t, total)

    def summary(self) -> dict[str, float | None]:
        if self.first is None or self.now is None or self.now[0] <= self.first[0]:
            return {"avg": None, "max": None, "last": None}
        (t0, v0), (t1, v1) = self.first, self.now
        avg = (v1 - v0) / (t1 - t0)
        if self.closed is None:
            return {"avg": avg, "max": avg, "last": avg}
        ct, cv = self.closed
        last = (v1 - cv) / (t1 - ct)
        peak = last if self.peak_before is None else max(self.peak_before, last)
        return {"avg": avg, "max": peak, "last": last}


@dataclass(slots=True)
class Latency:
    """Reset-adjusted cumulative histogram combined over series; window start and end."""

    raw: dict[SeriesKey, Histogram] = field(default_factory=dict)
    offset: dict[SeriesKey, Histogram] = field(default_factory=dict)
    first: Histogram | None = None
    now: Histogram | None = None

    def add(self, values: list[tuple[SeriesKey, Histogram]]) -> None:
        for k, h in values:
            old = self.raw.get(k)
            change = resets.histogram_change(old, h)
            if change == "reset" and old is not None:
                off = self.offset.get(k)
                self.offset[k] = old if off is None else hist.add(off, old)
            elif change == "rebucketed":
                self.offset.pop(k, None)
                self.first = None
            self.raw[k] = h
        total: Histogram | None = None
        for k, h in self.raw.items():
            off = self.offset.get(k)
            adj = h if off is None else hist.add(off, h)
            total = adj if total is None else hist.add(total, adj)
        if self.first is None:
            self.first = total
        self.now = total

    def window(self) -> Histogram | None:
        if self.now is None:
            return None
        if self.first is None or self.first is self.now:
            return None
        return hist.delta(self.now, self.first)

    def summary(self) -> dict[str, float | None]:
        return figures.Latency(self.window()).stats()


@dataclass(slots=True)
class _Bin:
    gauges: dict[str, Stat] = field(default_factory=dict)
    counters: dict[str, tuple[float, float]] = field(default_factory=dict)
    ttft: Histogram | None = None


class Timeline:
    """Primary signals in time bins of width `width`, doubled (bins merged) as time runs on."""

    def __init__(self, t0: float, expected_s: float | None) -> None:
        self.t0 = t0
        self.width = max((expected_s or BINS) / BINS, 1e-3)
        self.bins: dict[int, _Bin] = {}

    def _bin(self, t: float) -> _Bin:
        i = int((t - self.t0) // self.width)
        while i >= 2 * BINS:
            merged: dict[int, _Bin] = {}
            for j in sorted(self.bins):
                into = merged.get(j // 2)
                merged[j // 2] = self.bins[j] if into is None else _merge(into, self.bins[j])
            self.bins = merged
            self.width *= 2
            i //= 2
        found = self.bins.get(i)
        if found is None:
            found = self.bins[i] = _Bin()
        return found

    def add(
        self,
        t: float,
        gauges: Mapping[str, float],
        counters: Mapping[str, float],
        ttft: Histogram | None,
    ) -> None:
        b = self._bin(t)
        for name, v in gauges.items():
            b.gauges.setdefault(name, Stat()).add(v)
        for name, v in counters.items():
            b.counters[name] = (t, v)
        if ttft is not None:
            b.ttft = ttft

    def series(self) -> dict[str, list[float | None]]:
        """Per bin: gauge averages, counter rates, TTFT p90; `t` is each bin's middle."""
        if not self.bins:
            return {"t": [], **{name: [] for name in CHART}}
        last = max(self.bins)
        out: dict[str, list[float | None]] = {"t": []}
        for name in CHART:
            out[name] = []
        prev_counters: dict[str, tuple[float, float]] = {}
        prev_ttft: Histogram | None = None
        for i in range(last + 1):
            out["t"].append(self.t0 + (i + 0.5) * self.width)
            b = self.bins.get(i)
            for name in GAUGES:
                s = b.gauges.get(name) if b else None
                out[name].append(s.total / s.n if s and s.n else None)
            for name, counter in (
                ("preemptions_per_s", "preemptions"),
                ("generation_tokens_per_s", "generation_tokens"),
            ):
                cur = b.counters.get(counter) if b else None
                old = prev_counters.get(counter)
                rate = None
                if cur is not None and old is not None and cur[0] > old[0]:
                    rate = (cur[1] - old[1]) / (cur[0] - old[0])
                out[name].append(rate)
                if cur is not None:
                    prev_counters[counter] = cur
            p90 = None
            if b is not None and b.ttft is not None:
                if prev_ttft is not None:
                    p90 = figures.Latency(hist.delta(b.ttft, prev_ttft)).p90
                prev_ttft = b.ttft
            out["ttft_p90"].append(p90)
        return out


def _merge(a: _Bin, b: _Bin) -> _Bin:
    out = _Bin(dict(a.gauges), {**a.counters, **b.counters}, b.ttft or a.ttft)
    for name, s in b.gauges.items():
        mine = out.gauges.get(name)
        if mine is None:
            out.gauges[name] = s
        else:
            out.gauges[name] = Stat(
                mine.n + s.n, mine.total + s.total, min(mine.lo, s.lo), max(mine.hi, s.hi), s.last
            )
    return out


def _grouped(scrape: Scrape) -> dict[str, list[tuple[SeriesKey, float]]]:
    out: dict[str, list[tuple[SeriesKey, float]]] = {}
    for k, v in scrape.scalars.items():
        out.setdefault(k.signal, []).append((k, v))
    return out


def _combine(signal: str, values: Iterable[tuple[SeriesKey, float]]) -> float | None:
    vs = [v for _, v in values]
    if not vs:
        return None
    return max(vs) if BY_NAME[signal].combine == "max" else sum(vs)


class EndpointStats:
    """Every figure the report shows for one endpoint, fed one scrape at a time."""

    def __init__(self, url: str, t0: float, expected_s: float | None) -> None:
        self.url = url
        self.polls = 0
        self.failed = 0
        self.vllm = False
        self.last_error: str | None = None
        self.gauges = {name: Stat() for name in GAUGES}
        self.counters = {name: Counter() for name in RATES}
        self.latency = {name: Latency() for name in LATENCIES}
        self.timeline = Timeline(t0, expected_s)

    def add(self, scrape: Scrape) -> None:
        self.polls += 1
        if not scrape.ok:
            self.failed += 1
            self.last_error = scrape.error
            return
        self.vllm = self.vllm or scrape.has_vllm_series
        self.last_error = None
        t = scrape.t
        grouped = _grouped(scrape)
        gauges: dict[str, float] = {}
        for name in GAUGES:
            v = _combine(name, grouped.get(name, ()))
            if v is not None:
                self.gauges[name].add(v)
                gauges[name] = v
        counters: dict[str, float] = {}
        for rate, signal in RATES.items():
            values = grouped.get(signal)
            if values:
                c = self.counters[rate]
                c.add(t, values)
                assert c.now is not None
                counters[signal] = c.now[1]
        ttft = self.add_latency(scrape) if scrape.histograms else None
        self.timeline.add(t, gauges, counters, ttft)

    def add_latency(self, scrape: Scrape) -> Histogram | None:
        """Take the scrape's latency histograms; returns the window's cumulative TTFT."""
        grouped: dict[str, list[tuple[SeriesKey, Histogram]]] = {}
        for k, h in scrape.histograms.items():
            if k.signal in self.latency:
                grouped.setdefault(k.signal, []).append((k, h))
        for name, hs in grouped.items():
            self.latency[name].add(hs)
        return self.latency["ttft"].now if "ttft" in grouped else None

    @property
    def restarts(self) -> int:
        return max(c.resets for c in self.counters.values())


class GpuStats:
    """Per GPU: utilisation, memory, power and temperature over the window.

    A GPU that fails during the window (lost, needs a reset) keeps the figures read before,
    and `errors` says what it reports now and since when; `unavailable` is why no GPU could
    be read at the last poll (no driver, no library), so a report never drops GPUs silently.
    The GPUs are those `vtop.signals.gpus.shown` gives (NVML's and the pages' dcgm-exporter
    series), each with its source, as on the GPU panel and in `--once`.
    """

    FIELDS = ("util_pct", "mem_used_bytes", "power_w", "temp_c")

    def __init__(self) -> None:
        self.gpus: dict[int, tuple[str, dict[str, Stat], float | None]] = {}
        self.sources: dict[int, str] = {}
        """GPU index -> who read it last ("nvml" or "page")."""
        self.unavailable: str | None = None
        self.errors: dict[int, tuple[str, float]] = {}
        """GPU index -> (its current error, the time of the first poll that said it)."""

    def add(self, status: GpuStatus, t: float) -> None:
        self.unavailable = status.unavailable
        for g in status.gpus:
            if g.error is None:
                self.errors.pop(g.index, None)
            elif self.errors.get(g.index, ("",))[0] != g.error:
                self.errors[g.index] = (g.error, t)
            self.sources[g.index] = g.source
            entry = self.gpus.get(g.index)
            if entry is None:
                entry = (g.name, {name: Stat() for name in self.FIELDS}, None)
            name, stats, total = entry
            for f in self.FIELDS:
                v = getattr(g, f)
                if v is not None:
                    stats[f].add(float(v))
            self.gpus[g.index] = (
                g.name or name,
                stats,
                float(g.mem_total_bytes) if g.mem_total_bytes else total,
            )


class WindowStats:
    """All endpoints and GPUs of a report window."""

    def __init__(self, expected_s: float | None = None) -> None:
        self.expected_s = expected_s
        self.endpoints: dict[str, EndpointStats] = {}
        self.gpu = GpuStats()
        self.polls = 0
        self.t_first: float | None = None
        self.t_last: float | None = None

    def add(self, frame: Frame, *, gpu: bool = True) -> None:
        """One poll; `gpu=False` for a light frame, which carries no GPU readings."""
        self.polls += 1
        if self.t_first is None:
            self.t_first = frame.t
        self.t_last = frame.t
        for scrape in frame.scrapes:
            ep = self.endpoints.get(scrape.endpoint)
            if ep is None:
                ep = self.endpoints[scrape.endpoint] = EndpointStats(
                    scrape.endpoint, frame.t, self.expected_s
                )
            ep.add(scrape)
        if gpu:
            scrapes = [(s, is_local(s.endpoint)) for s in frame.scrapes]
            self.gpu.add(gpus.shown(frame.gpu, scrapes), frame.t)
