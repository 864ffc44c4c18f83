"""Histogram arithmetic with Prometheus semantics.

Percentiles over a window come from the *increase* of each bucket over that window, exactly as
`histogram_quantile(q, rate(x_bucket[w]))` computes them; engines are merged by adding buckets,
never by averaging their percentiles. Bucket bounds differ by vLLM version and can be set by
the user, so every operation reads the bounds from the data.
"""

from __future__ import annotations

import math

from vtop.model import Histogram


def delta(new: Histogram, old: Histogram | None) -> Histogram | None:
    """The observations that arrived between `old` and `new` (both cumulative, reset-adjusted).

    None when the two are not comparable (different bounds) or nothing is known.
    """
    if old is None:
        return new
    if new.bounds != old.bounds:
        return None
    return Histogram(
        bounds=new.bounds,
        buckets=tuple(n - o for n, o in zip(new.buckets, old.buckets, strict=True)),
        count=new.count - old.count,
        sum=new.sum - old.sum,
    )


def add(a: Histogram, b: Histogram) -> Histogram:
    """Bucket-wise sum of two histograms with the same bounds (else the bounds they share)."""
    if a.bounds == b.bounds:
        return Histogram(
            bounds=a.bounds,
            buckets=tuple(x + y for x, y in zip(a.buckets, b.buckets, strict=True)),
            count=a.count + b.count,
            sum=a.sum + b.sum,
        )
    shared = sorted(set(a.bounds) & set(b.bounds))
    ia = {bound: i for i, bound in enumerate(a.bounds)}
    ib = {bound: i for i, bound in enumerate(b.bounds)}
    return Histogram(
        bounds=tuple(shared),
        buckets=tuple(a.buckets[ia[x]] + b.buckets[ib[x]] for x in shared),
        count=a.count + b.count,
        sum=a.sum + b.sum,
    )


def quantile(q: float, h: Histogram | None) -> float | None:
    """`histogram_quantile(q, h)`: linear interpolation inside the bucket holding rank q·count.

    None when there are no observations. A rank in the +Inf bucket yields the highest finite
    bound (Prometheus's convention); buckets that decrease (a broken page) are made monotonic
    first, as Prometheus does.
    """
    if h is None or not h.count > 0 or math.isnan(q):
        return None
    if q <= 0:
        return 0.0 if not h.bounds or h.bounds[0] >= 0 else h.bounds[0]
    if q >= 1:
        return h.bounds[-1] if h.bounds else None
    counts: list[float] = []
    running = 0.0
    for c in h.buckets:
        running = max(running, c)
        counts.append(running)
    total = max(h.count, running)
    rank = q * total
    for i, cum in enumerate(counts):
        if cum >= rank:
            upper = h.bounds[i]
            lower = h.bounds[i - 1] if i > 0 else 0.0
            below = counts[i - 1] if i > 0 else 0.0
            if i == 0 and upper <= 0:
                return upper
            in_bucket = cum - below
            if in_bucket <= 0:
                return upper
            return lower + (upper - lower) * (rank - below) / in_bucket
    return h.bounds[-1] if h.bounds else None


def mean(h: Histogram | None) -> float | None:
    """Mean observation (sum / count), None without observations."""
    if h is None or not h.count > 0 or math.isnan(h.sum):
        return None
    return h.sum / h.count
