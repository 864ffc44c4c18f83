"""Windowed arithmetic over a series' raw arrays: what `Store`'s questions compute.

Plain functions over the store's aligned arrays (poll times, one value column per series, the
histogram tracks), not methods and not objects: a question costs the store one call here and
allocates nothing beyond its answer, which matters on the TUI's hot path where rules and charts
ask thousands of them per second. The loops stay index walks over `array('d')` and NaN is tested
as `v == v` (False for NaN only, and twice as fast as `math.isnan` in a comprehension).

Counters arrive reset-adjusted (`vtop.signals.resets`), so a rate or an increase needs only the
window's first and last samples and is never negative; histograms arrive as cumulative
snapshots, so a window's observations are its last snapshot less its first.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_right

from vtop.model import Histogram
from vtop.signals import histogram as hist
from vtop.signals.histcolumns import HistTrack


def start(t: array[float], window_s: float | None) -> int:
    """Index of the first poll in the window (now - w, now]."""
    if window_s is None or not t:
        return 0
    # The window always holds the latest poll, however short w is (a window below the
    # timestamps' float resolution would otherwise come back empty).
    return min(bisect_right(t, t[-1] - window_s), len(t) - 1)


def quantile(q: float, vs: list[float]) -> float | None:
    """`quantile_over_time`: linear interpolation between the samples' order statistics."""
    vs = sorted(vs)
    if not vs:
        return None
    pos = max(0.0, min(1.0, q)) * (len(vs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(vs) - 1)
    return vs[lo] + (vs[hi] - vs[lo]) * (pos - lo)


def per_second(t: array[float], vals: array[float], first: int) -> float | None:
    """Increase per second between the first and last known samples from `first` on."""
    end = len(vals) - 1
    while first < end and math.isnan(vals[first]):
        first += 1
    while end > first and math.isnan(vals[end]):
        end -= 1
    if end <= first or math.isnan(vals[first]):
        return None
    return (vals[end] - vals[first]) / (t[end] - t[first])


def extrapolated(
    t: array[float], vals: array[float], first: int, window_s: float, *, counter: bool, rate: bool
) -> float | None:
    """PromQL's `increase`/`rate` over (now - w, now], extrapolated to the window's edges."""
    end = len(vals) - 1
    while first <= end and math.isnan(vals[first]):
        first += 1
    while end > first and math.isnan(vals[end]):
        end -= 1
    if end <= first:
        return None
    samples = len([v for v in vals[first : end + 1] if v == v])  # noqa: PLR0124 (not NaN)
    t_first, t_last = t[first], t[end]
    result = vals[end] - vals[first]
    sampled = t_last - t_first
    range_end = t[-1]
    range_start = range_end - window_s
    to_start = t_first - range_start
    to_end = range_end - t_last
    avg_gap = sampled / (samples - 1)
    if counter and result > 0 and vals[first] >= 0:
        to_zero = sampled * (vals[first] / result)
        to_start = min(to_start, to_zero)
    threshold = avg_gap * 1.1
    interval = sampled
    interval += to_start if to_start < threshold else avg_gap / 2
    interval += to_end if to_end < threshold else avg_gap / 2
    result *= interval / sampled
    return result / window_s if rate else result


def hist_delta(track: HistTrack, first: int) -> Histogram | None:
    """Observations between the first and last present snapshots from `first` on."""
    present = track.present
    end = len(present) - 1
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
