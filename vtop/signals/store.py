"""The bounded history of one endpoint, and the windowed questions rules and charts ask of it.

Layout: one array of poll times and, aligned with it, one array of values per series (NaN where
a poll did not see the series). Aligned columns make "the value of every signal at poll i"
free, which is what rules that combine signals (the share of time running sat at its cap while
requests waited) need, and they keep memory flat: a float per series per poll.

Counters are stored reset-adjusted (a drop is taken as a restart from zero, as Prometheus
does: `vtop.signals.resets`, the rule every reader of counters shares), so `rate()` and
`increase()` never go negative and need only the window's first and last samples.
Histograms are kept as reset-adjusted cumulative snapshots; a window's percentiles come from
the difference of its last and first snapshot. Every series also rolls up into an
aggregate over models and engines (`SeriesKey(signal, ALL, ALL, label)`, and with
`label=ALL` across label values too) with the signal's own rule: sum for counts, max for KV
usage, bucket sums for histograms.

Unknown is `None`: a series never seen, a poll that failed, a window with too few samples.

This module keeps the history (ingest, the ring buffers, the question API); the arithmetic a
question does over a window of raw arrays is `vtop.signals.windows`, and the columnar layout of
histograms is `vtop.signals.histcolumns`.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from vtop.model import ALL, Event, GpuStatus, Histogram, HostReading, Scrape, SeriesKey
from vtop.signals import gpus, resets, windows
from vtop.signals import histogram as hist
from vtop.signals.catalog import BY_NAME, Kind, Signal
from vtop.signals.histcolumns import HistColumn, HistTrack

NAN = math.nan

_GPU_FIELDS = gpus.NVML_FIELDS
_GPU_SIGNALS = gpus.SIGNALS


def key(signal: str, label: str = "") -> SeriesKey:
    """The aggregate series of `signal` (over every model and engine)."""
    return SeriesKey(signal, ALL, ALL, label)


@dataclass(slots=True)
class _Track:
    signal: Signal
    values: array[float]
    last_raw: float = NAN
    offset: float = 0.0
    last: float = NAN
    """Last known (adjusted) value, carried across polls that miss the series (counters)."""


class Store:
    """History of one endpoint, at most `capacity` polls (older ones are dropped)."""

    def __init__(self, endpoint: str, *, capacity: int = 3600) -> None:
        if capacity < 2:
            raise ValueError("a store needs room for at least two polls")
        self.endpoint = endpoint
        self.capacity = capacity
        self._t: array[float] = array("d")
        self._tracks: dict[SeriesKey, _Track] = {}
        self._hists: dict[SeriesKey, HistTrack] = {}
        self._groups: dict[SeriesKey, list[SeriesKey]] = {}
        self._hist_groups: dict[SeriesKey, list[SeriesKey]] = {}
        self.events: list[Event] = []
        self.info: dict[str, str] = {}
        self.context: dict[str, str] = {}
        """Text set from outside the page at the latest poll (the emptiest replica's name)."""
        self.polls = 0
        self.failed_polls = 0

    # -- ingest --------------------------------------------------------------------------------

    def ingest(
        self, scrape: Scrape, gpu: GpuStatus | None = None, host: HostReading | None = None
    ) -> list[Event]:
        """Add one poll, with this host's GPUs and CPU where the endpoint is served from this
        host. Returns the events it revealed (a server restart)."""
        t = scrape.t
        if self._t and t <= self._t[-1]:
            return []
        events: list[Event] = []
        if scrape.ok and self._restarted(scrape):
            events.append(Event(t, "restart", self.endpoint, "server restarted (counters reset)"))
        self._t.append(t)
        self.polls += 1
        n = len(self._t)
        values: dict[SeriesKey, float] = dict(scrape.scalars) if scrape.ok else {}
        if not scrape.ok:
            self.failed_polls += 1
        values[key("up")] = 1.0 if scrape.ok else 0.0
        if scrape.latency_s is not None:
            values[key("scrape_latency")] = scrape.latency_s
        if scrape.ok and scrape.size_bytes is not None:
            values[key("scrape_bytes")] = float(scrape.size_bytes)
        if gpu is not None and gpu.gpus:
            # NVML reads this host's GPUs directly; it replaces what a page says of the same
            # GPU (dcgm-exporter series), so one GPU is never counted twice.
            nvml = {str(r.index) for r in gpu.gpus}
            for k in [k for k in values if k.signal in _GPU_SIGNALS and k.label in nvml]:
                del values[k]
            for reading in gpu.gpus:
                for signal, attr in _GPU_FIELDS:
                    v = getattr(reading, attr)
                    if v is not None:
                        values[SeriesKey(signal, "", "", str(reading.index))] = float(v)
        if host is not None and host.cpu_pct is not None:
            values[key("host_cpu")] = host.cpu_pct / 100
        if scrape.info:
            self.info = dict(scrape.info)
        self._ingest_scalars(values, n)
        self._ingest_hists(scrape.histograms if scrape.ok else {}, n)
        if n >= self.capacity + max(16, self.capacity // 8):
            self._trim(n - self.capacity)
        self.events.extend(events)
        del self.events[:-256]
        return events

    def note(self, event: Event) -> None:
        """Record an event that the source saw (a disconnect, a reconnect)."""
        self.events.append(event)

    def put(self, signal: str, value: float | None) -> None:
        """Set `signal` at the latest poll: a value computed outside this endpoint's page (how
        it compares with its replicas, `vtop.replicas`). Unknown is None; no poll, no effect."""
        n = len(self._t)
        if not n:
            return
        k = key(signal)
        track = self._tracks.get(k)
        if track is None:
            if value is None:
                return  # never known: no column (a lone endpoint pays nothing)
            sig = BY_NAME.get(signal) or BY_NAME["up"]
            track = self._tracks[k] = _Track(sig, array("d", [NAN]) * n)
        track.values[-1] = NAN if value is None else value
        track.last = track.last_raw = track.values[-1]

    def _restarted(self, scrape: Scrape) -> bool:
        return resets.restarted(scrape.scalars, self._last_raw)

    def _last_raw(self, k: SeriesKey) -> float | None:
        """The series' latest value as the page gave it (NaN: not seen yet)."""
        track = self._tracks.get(k)
        return track.last_raw if track is not None else None

    def _track(self, k: SeriesKey, n: int) -> _Track:
        track = self._tracks.get(k)
        if track is None:
            sig = BY_NAME.get(k.signal) or BY_NAME["up"]
            track = _Track(sig, array("d", [NAN]) * (n - 1))
            self._tracks[k] = track
            if k.model != ALL:
                for agg in _aggregates(k):
                    self._groups.setdefault(agg, []).append(k)
                    # An aggregate of one series *is* that series: share its column until a
                    # second series joins (most servers have one model and one engine).
                    self._tracks.setdefault(agg, track)
        return track

    def _ingest_scalars(self, values: dict[SeriesKey, float], n: int) -> None:
        for k, v in values.items():
            track = self._track(k, n)
            if track.signal.kind is Kind.COUNTER:
                if resets.counter_reset(track.last_raw, v):
                    track.offset += track.last_raw
                track.last_raw = v
                v += track.offset
            else:
                track.last_raw = v
            track.last = v
            track.values.append(v)
        for agg, members in self._groups.items():
            track = self._tracks[agg]
            if len(members) == 1 and track is self._tracks[members[0]]:
                continue  # an alias: appended with its member
            if track is self._tracks[members[0]]:  # a second series joined: own column now
                track = _Track(track.signal, track.values[: n - 1])
                self._tracks[agg] = track
            counter = track.signal.kind is Kind.COUNTER
            combined = NAN
            if any(m in values for m in members):
                present = [self._tracks[m].last if counter else values.get(m, NAN) for m in members]
                known = [v for v in present if not math.isnan(v)]
                if known:
                    combined = max(known) if track.signal.combine == "max" else sum(known)
            track.last = track.last_raw = combined
            track.values.append(combined)
        for track in self._tracks.values():
            if len(track.values) < n:
                track.values.append(NAN)

    def _ingest_hists(self, hists: Mapping[SeriesKey, Histogram], n: int) -> None:
        for k, h in hists.items():
            track = self._hists.get(k)
            if track is None:
                track = self._hists[k] = HistTrack(n - 1)
                for agg in _aggregates(k):
                    self._hist_groups.setdefault(agg, []).append(k)
                    self._hists.setdefault(agg, track)
            raw = track.last_raw
            change = resets.histogram_change(raw, h)
            if change == "rebucketed":
                track.offset = None
            elif change == "reset" and raw is not None:
                track.offset = raw if track.offset is None else hist.add(track.offset, raw)
            track.last_raw = h
            adjusted = h if track.offset is None else hist.add(track.offset, h)
            track.last = adjusted
            track.append(adjusted)
        for agg, members in self._hist_groups.items():
            agg_track = self._hists[agg]
            first = self._hists[members[0]]
            if len(members) == 1 and agg_track is first:
                continue
            if agg_track is first:
                copy = HistTrack(0)
                for i in range(n - 1):
                    copy.append(first.at(i))
                agg_track = self._hists[agg] = copy
            total: Histogram | None = None
            if any(m in hists for m in members):
                for m in members:
                    last = self._hists[m].last
                    if last is not None:
                        total = last if total is None else hist.add(total, last)
            agg_track.last = total
            agg_track.append(total)
        for track in self._hists.values():
            if len(track) < n:
                track.append(None)

    def _trim(self, drop: int) -> None:
        del self._t[:drop]
        for track in {id(t): t for t in self._tracks.values()}.values():
            del track.values[:drop]
        for htrack in {id(t): t for t in self._hists.values()}.values():
            htrack.drop(drop)

    # -- what is there -------------------------------------------------------------------------

    @property
    def now(self) -> float | None:
        """Time of the latest poll."""
        return self._t[-1] if self._t else None

    def __len__(self) -> int:
        return len(self._t)

    def series(self, signal: str) -> list[SeriesKey]:
        """Per-model/engine keys of `signal`, sorted (the aggregate excluded)."""
        keys = [k for k in (*self._tracks, *self._hists) if k.signal == signal and k.model != ALL]
        return sorted(keys)

    def labels(self, signal: str) -> list[str]:
        """Label values seen for `signal` on the aggregate (GPU indices, finish reasons, ...)."""
        found = {k.label for k in (*self._tracks, *self._hists) if k.signal == signal}
        return sorted(found - {ALL})

    def engines(self) -> list[tuple[str, str]]:
        """(model, engine) pairs that schedule a batch of their own on this endpoint: those of
        the scheduler's `running` gauge. Other per-model series (no `engine` label, or a
        process's own metrics) are not engines."""
        return sorted({(k.model, k.engine) for k in self.series("running")})

    def restarts(self) -> list[float]:
        return [e.t for e in self.events if e.kind == "restart"]

    # -- windows -------------------------------------------------------------------------------

    def times(self, window_s: float | None = None) -> Sequence[float]:
        return self._t[windows.start(self._t, window_s) :]

    def values(self, k: SeriesKey | str, window_s: float | None = None) -> list[float | None]:
        """The series over the window, aligned with `times(window_s)`; None where unknown."""
        k = _k(k)
        track = self._tracks.get(k)
        start = windows.start(self._t, window_s)
        if track is None:
            return [None] * (len(self._t) - start)
        # `v == v` is False for NaN only, and twice as fast as math.isnan in a comprehension
        # (the rules read a few thousand samples per evaluation this way).
        return [v if v == v else None for v in track.values[start:]]  # noqa: PLR0124

    def _window(self, k: SeriesKey | str, window_s: float | None) -> list[float]:
        track = self._tracks.get(_k(k))
        if track is None:
            return []
        return [v for v in track.values[windows.start(self._t, window_s) :] if v == v]  # noqa: PLR0124

    def last(self, k: SeriesKey | str) -> float | None:
        """The latest poll's value (None if the latest poll did not see it)."""
        track = self._tracks.get(_k(k))
        if track is None or not track.values:
            return None
        v = track.values[-1]
        if math.isnan(v):
            return None
        if track.signal.kind is Kind.COUNTER:
            return track.last_raw if not math.isnan(track.last_raw) else None
        return v

    def avg(self, k: SeriesKey | str, window_s: float | None = None) -> float | None:
        vs = self._window(k, window_s)
        return sum(vs) / len(vs) if vs else None

    def min(self, k: SeriesKey | str, window_s: float | None = None) -> float | None:
        vs = self._window(k, window_s)
        return min(vs) if vs else None

    def max(self, k: SeriesKey | str, window_s: float | None = None) -> float | None:
        vs = self._window(k, window_s)
        return max(vs) if vs else None

    def quantile(self, q: float, k: SeriesKey | str, window_s: float | None = None) -> float | None:
        """`quantile_over_time`: linear interpolation between the samples' order statistics."""
        return windows.quantile(q, self._window(k, window_s))

    def count(self, k: SeriesKey | str, window_s: float | None = None) -> int:
        """Number of polls in the window that saw the series."""
        return len(self._window(k, window_s))

    def per_second(self, k: SeriesKey | str, window_s: float | None = None) -> float | None:
        """Increase per second between the window's first and last samples (no extrapolation).

        What a screen means by "tokens/s over the last 5 s"; `rate()` is the PromQL one.
        """
        track = self._tracks.get(_k(k))
        if track is None:
            return None
        return windows.per_second(self._t, track.values, windows.start(self._t, window_s))

    def increase(self, k: SeriesKey | str, window_s: float) -> float | None:
        """`increase(x[w])` with Prometheus's extrapolation to the window's edges."""
        return self._extrapolated(_k(k), window_s, rate=False)

    def rate(self, k: SeriesKey | str, window_s: float) -> float | None:
        """`rate(x[w])`: per-second increase; resets never make it negative."""
        return self._extrapolated(_k(k), window_s, rate=True)

    def _extrapolated(self, k: SeriesKey, window_s: float, *, rate: bool) -> float | None:
        track = self._tracks.get(k)
        if track is None or not self._t:
            return None
        t = self._t
        counter = track.signal.kind is Kind.COUNTER
        first = windows.start(t, window_s)
        return windows.extrapolated(t, track.values, first, window_s, counter=counter, rate=rate)

    def hist_delta(self, k: SeriesKey | str, window_s: float | None = None) -> Histogram | None:
        """Observations that arrived within the window (bucket increases)."""
        track = self._hists.get(_k(k))
        if track is None:
            return None
        return windows.hist_delta(track, windows.start(self._t, window_s))

    def hist_quantile(
        self, q: float, k: SeriesKey | str, window_s: float | None = None
    ) -> float | None:
        """`histogram_quantile(q, rate(x_bucket[w]))`."""
        return hist.quantile(q, self.hist_delta(k, window_s))

    def hist_mean(self, k: SeriesKey | str, window_s: float | None = None) -> float | None:
        """Mean observation within the window (Δsum / Δcount)."""
        return hist.mean(self.hist_delta(k, window_s))

    def hist_values(self, k: SeriesKey | str, window_s: float | None = None) -> HistColumn:
        """The cumulative (reset-adjusted) histograms over the window, aligned with `times()`.

        Charts that draw a percentile per time bucket take the difference of two of these;
        the column builds a `Histogram` only for the polls that are asked for.
        """
        return HistColumn(self._hists.get(_k(k)), windows.start(self._t, window_s), len(self._t))

    def hist_last(self, k: SeriesKey | str) -> Histogram | None:
        """The latest cumulative (reset-adjusted) histogram."""
        track = self._hists.get(_k(k))
        return track.at(len(track) - 1) if track is not None and len(track) else None


def _k(k: SeriesKey | str) -> SeriesKey:
    return key(k) if isinstance(k, str) else k


def _aggregates(k: SeriesKey) -> list[SeriesKey]:
    aggs = [SeriesKey(k.signal, ALL, ALL, k.label)]
    if k.label:
        aggs.append(SeriesKey(k.signal, ALL, ALL, ALL))
    return aggs
