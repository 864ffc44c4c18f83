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
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import overload

from vtop.model import ALL, Event, GpuStatus, Histogram, Scrape, SeriesKey
from vtop.signals import gpus, resets
from vtop.signals import histogram as hist
from vtop.signals.catalog import BY_NAME, Kind, Signal

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


class _HistTrack:
    """Cumulative, reset-adjusted histograms of one series, one column per bucket.

    A column of floats per bucket (plus count and sum) holds a poll's histogram in 8 bytes
    per bucket; a `Histogram` object per poll would cost several times that, and an hour of
    history for every latency histogram of a data-parallel server adds up.
    """

    __slots__ = ("bounds", "cols", "last", "last_raw", "offset", "present")

    def __init__(self, polls: int) -> None:
        self.bounds: tuple[float, ...] | None = None
        self.cols: list[array[float]] = []
        self.present = array("b", bytes(polls))
        self.last_raw: Histogram | None = None
        self.offset: Histogram | None = None
        self.last: Histogram | None = None

    def __len__(self) -> int:
        return len(self.present)

    def append(self, h: Histogram | None) -> None:
        if h is None:
            self.present.append(0)
            for col in self.cols:
                col.append(NAN)
            return
        if h.bounds != self.bounds:
            self.bounds = h.bounds
            self.cols = [array("d", [NAN]) * len(self.present) for _ in range(len(h.bounds) + 2)]
            self.present = array("b", bytes(len(self.present)))
        self.present.append(1)
        cols = self.cols
        for col, v in zip(cols, h.buckets, strict=False):
            col.append(v)
        cols[-2].append(h.count)
        cols[-1].append(h.sum)

    def at(self, i: int) -> Histogram | None:
        if not self.present[i] or self.bounds is None:
            return None
        cols = self.cols
        return Histogram(self.bounds, tuple(col[i] for col in cols[:-2]), cols[-2][i],
                         cols[-1][i])  # fmt: skip

    def drop(self, n: int) -> None:
        del self.present[:n]
        for col in self.cols:
            del col[:n]


class Store:
    """History of one endpoint, at most `capacity` polls (older ones are dropped)."""

    def __init__(self, endpoint: str, *, capacity: int = 3600) -> None:
        if capacity < 2:
            raise ValueError("a store needs room for at least two polls")
        self.endpoint = endpoint
        self.capacity = capacity
        self._t: array[float] = array("d")
        self._tracks: dict[SeriesKey, _Track] = {}
        self._hists: dict[SeriesKey, _HistTrack] = {}
        self._groups: dict[SeriesKey, list[SeriesKey]] = {}
        self._hist_groups: dict[SeriesKey, list[SeriesKey]] = {}
        self.events: list[Event] = []
        self.info: dict[str, str] = {}
        self.context: dict[str, str] = {}
        """Text set from outside the page at the latest poll (the emptiest replica's name)."""
        self.polls = 0
        self.failed_polls = 0

    # -- ingest --------------------------------------------------------------------------------

    def ingest(self, scrape: Scrape, gpu: GpuStatus | None = None) -> list[Event]:
        """Add one poll. Returns the events it revealed (a server restart)."""
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
                present = [self._tracks[m].last if counter else values.get(m, NAN)
                           for m in members]  # fmt: skip
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
                track = self._hists[k] = _HistTrack(n - 1)
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
                copy = _HistTrack(0)
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

    def _start(self, window_s: float | None) -> int:
        if window_s is None or not self._t:
            return 0
        # The window (now - w, now] always holds the latest poll, however short w is (a
        # window below the timestamps' float resolution would otherwise come back empty).
        return min(bisect_right(self._t, self._t[-1] - window_s), len(self._t) - 1)

    def times(self, window_s: float | None = None) -> Sequence[float]:
        return self._t[self._start(window_s) :]

    def values(self, k: SeriesKey | str, window_s: float | None = None) -> list[float | None]:
        """The series over the window, aligned with `times(window_s)`; None where unknown."""
        k = _k(k)
        track = self._tracks.get(k)
        start = self._start(window_s)
        if track is None:
            return [None] * (len(self._t) - start)
        # `v == v` is False for NaN only, and twice as fast as math.isnan in a comprehension
        # (the rules read a few thousand samples per evaluation this way).
        return [v if v == v else None for v in track.values[start:]]  # noqa: PLR0124

    def _window(self, k: SeriesKey | str, window_s: float | None) -> list[float]:
        track = self._tracks.get(_k(k))
        if track is None:
            return []
        return [v for v in track.values[self._start(window_s) :] if v == v]  # noqa: PLR0124

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
        vs = sorted(self._window(k, window_s))
        if not vs:
            return None
        pos = max(0.0, min(1.0, q)) * (len(vs) - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, len(vs) - 1)
        return vs[lo] + (vs[hi] - vs[lo]) * (pos - lo)

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
        vals = track.values
        first, end = self._start(window_s), len(vals) - 1
        while first < end and math.isnan(vals[first]):
            first += 1
        while end > first and math.isnan(vals[end]):
            end -= 1
        if end <= first or math.isnan(vals[first]):
            return None
        return (vals[end] - vals[first]) / (self._t[end] - self._t[first])

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
        start = self._start(window_s)
        vals = track.values
        first = start
        end = len(vals) - 1
        while first <= end and math.isnan(vals[first]):
            first += 1
        while end > first and math.isnan(vals[end]):
            end -= 1
        if end <= first:
            return None
        samples = len([v for v in vals[first : end + 1] if v == v])  # noqa: PLR0124 (not NaN)
        t_first, t_last = self._t[first], self._t[end]
        result = vals[end] - vals[first]
        sampled = t_last - t_first
        range_end = self._t[-1]
        range_start = range_end - window_s
        to_start = t_first - range_start
        to_end = range_end - t_last
        avg_gap = sampled / (samples - 1)
        if track.signal.kind is Kind.COUNTER and result > 0 and vals[first] >= 0:
            to_zero = sampled * (vals[first] / result)
            to_start = min(to_start, to_zero)
        threshold = avg_gap * 1.1
        interval = sampled
        interval += to_start if to_start < threshold else avg_gap / 2
        interval += to_end if to_end < threshold else avg_gap / 2
        result *= interval / sampled
        return result / window_s if rate else result

    def hist_delta(self, k: SeriesKey | str, window_s: float | None = None) -> Histogram | None:
        """Observations that arrived within the window (bucket increases)."""
        track = self._hists.get(_k(k))
        if track is None:
            return None
        present = track.present
        first, end = self._start(window_s), len(present) - 1
        while first < end and not present[first]:
            first += 1
        while end > first and not present[end]:
            end -= 1
        if end <= first:
            return None
        old, new = track.at(first), track.at(end)
        if old is None or new is None:
            return None
        return hist.delta(new, old)

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
        return HistColumn(self._hists.get(_k(k)), self._start(window_s), len(self._t))

    def hist_last(self, k: SeriesKey | str) -> Histogram | None:
        """The latest cumulative (reset-adjusted) histogram."""
        track = self._hists.get(_k(k))
        return track.at(len(track) - 1) if track is not None and len(track) else None


class HistColumn(Sequence[Histogram | None]):
    """A window of one histogram series, read lazily (see `Store.hist_values`)."""

    def __init__(self, track: _HistTrack | None, start: int, end: int) -> None:
        self._track = track
        self._start = start
        self._len = max(0, end - start)

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, i: int) -> Histogram | None: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[Histogram | None]: ...

    def __getitem__(self, i: int | slice) -> Histogram | Sequence[Histogram | None] | None:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._len))]
        if i < 0:
            i += self._len
        if not 0 <= i < self._len:
            raise IndexError(i)
        return None if self._track is None else self._track.at(self._start + i)

    def present(self) -> list[bool]:
        """Which polls of the window hold a histogram (without building any)."""
        if self._track is None:
            return [False] * self._len
        return [bool(p) for p in self._track.present[self._start : self._start + self._len]]


def _k(k: SeriesKey | str) -> SeriesKey:
    return key(k) if isinstance(k, str) else k


def _aggregates(k: SeriesKey) -> list[SeriesKey]:
    aggs = [SeriesKey(k.signal, ALL, ALL, k.label)]
    if k.label:
        aggs.append(SeriesKey(k.signal, ALL, ALL, ALL))
    return aggs
