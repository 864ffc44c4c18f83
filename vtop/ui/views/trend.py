"""Series cut into fixed time buckets, for charts that shift a cell only every few seconds.

A chart cell covers a fixed span of wall time aligned to the epoch (`floor(t / bucket_s)`),
and only completed buckets are drawn. So a chart changes when a bucket boundary passes, not on
every poll: at the default 5-minute window a 60-cell chart repaints once every 5 s, which is
most of what keeps vtop's CPU and the bytes it sends to the terminal low. A wider chart gets
more cells of the same nice size, so it shows more history rather than a stretched picture.

Per bucket: gauges average their samples, counters give their rate between the last samples
before each edge (reset-adjusted, so never negative), histograms give a percentile of the
observations between those samples (bucket deltas, as Prometheus does). A bucket without the
data to say is `None` and draws as a gap, never as 0.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass

from vtop.model import Histogram
from vtop.signals import histogram as hist
from vtop.signals.histcolumns import HistColumn

BUCKET_LADDER = (1.0, 2.0, 5.0, 10.0, 15.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0)


def bucket_seconds(window_s: float, cells: int, interval_s: float) -> float:
    """The smallest nice bucket so that `cells` buckets span the window, and no bucket is
    shorter than one poll interval (it would be empty)."""
    need = max(window_s / max(cells, 1), interval_s)
    for b in BUCKET_LADDER:
        if b >= need - 1e-9:
            return b
    return math.ceil(need / 3600) * 3600


@dataclass(frozen=True, slots=True)
class Buckets:
    """Where `cells` completed buckets of `bucket_s` lie, the last ending at or before `now`."""

    bucket_s: float
    cells: int
    last: int
    """Index (`floor(t / bucket_s)`) of the bucket in progress: it is not drawn."""

    @classmethod
    def at(cls, now: float, bucket_s: float, cells: int) -> Buckets:
        return cls(bucket_s, cells, math.floor(now / bucket_s))

    @property
    def edges(self) -> list[float]:
        """`cells + 1` edges, oldest first; the last one is the start of the current bucket."""
        first = self.last - self.cells
        return [(first + k) * self.bucket_s for k in range(self.cells + 1)]

    def cell_of(self, t: float) -> int | None:
        """The cell holding time `t`, or None when it lies outside the drawn buckets."""
        k = math.floor(t / self.bucket_s) - (self.last - self.cells)
        return k if 0 <= k < self.cells else None


def gauge(
    times: Sequence[float], values: Sequence[float | None], b: Buckets, *, agg: str = "avg"
) -> list[float | None]:
    """Average (or max) of the samples within each bucket."""
    out: list[float | None] = []
    edges = b.edges
    lo = bisect_left(times, edges[0])
    for k in range(b.cells):
        hi = bisect_left(times, edges[k + 1], lo)
        known = [v for v in values[lo:hi] if v is not None]
        if not known:
            out.append(None)
        elif agg == "max":
            out.append(max(known))
        else:
            out.append(sum(known) / len(known))
        lo = hi
    return out


def _pairs(
    times: Sequence[float], known: Sequence[bool], b: Buckets
) -> list[tuple[int, int] | None]:
    """Per bucket, the sample indices to difference: the last known sample before its start
    and the last known sample before its end. None when the bucket holds no known sample, or
    when the start sample lies more than a bucket before the bucket (after an outage the
    whole increase would be smeared into one cell)."""
    edges = b.edges
    last: list[int] = []
    for e in edges:
        i = bisect_left(times, e) - 1
        while i >= 0 and not known[i]:
            i -= 1
        last.append(i)
    out: list[tuple[int, int] | None] = []
    for k in range(b.cells):
        i, j = last[k], last[k + 1]
        if i < 0 or j <= i or times[j] < edges[k] or times[i] < edges[k] - 2 * b.bucket_s:
            out.append(None)
        else:
            out.append((i, j))
    return out


def rate(times: Sequence[float], values: Sequence[float | None], b: Buckets) -> list[float | None]:
    """Per-second increase of a (reset-adjusted) counter within each bucket."""
    out: list[float | None] = []
    for pair in _pairs(times, [v is not None for v in values], b):
        if pair is None:
            out.append(None)
            continue
        i, j = pair
        vi, vj = values[i], values[j]
        assert vi is not None and vj is not None
        out.append(max(0.0, vj - vi) / (times[j] - times[i]))
    return out


def quantile(
    times: Sequence[float], hists: Sequence[Histogram | None], b: Buckets, q: float
) -> list[float | None]:
    """The q-quantile of the observations that arrived within each bucket."""
    out: list[float | None] = []
    present = hists.present() if isinstance(hists, HistColumn) else [h is not None for h in hists]
    for pair in _pairs(times, present, b):
        if pair is None:
            out.append(None)
            continue
        old, new = hists[pair[0]], hists[pair[1]]
        out.append(hist.quantile(q, hist.delta(new, old)) if old and new else None)
    return out
