"""Histogram quantiles follow Prometheus's histogram_quantile, kept within what the mean allows."""

from __future__ import annotations

import math

import pytest

from vtop.model import Histogram
from vtop.signals import histogram as hist


def h(bounds: tuple[float, ...], buckets: tuple[float, ...], count: float, total: float = 0.0
      ) -> Histogram:  # fmt: skip
    return Histogram(bounds, buckets, count, total)


def test_linear_interpolation_inside_the_bucket() -> None:
    # 10 observations: 4 in (0, 0.1], 6 in (0.1, 1]. Median rank 5 -> 1/6 into the 2nd bucket.
    x = h((0.1, 1.0), (4, 10), 10)
    assert hist.quantile(0.5, x) == pytest.approx(0.1 + 0.9 * (1 / 6))
    assert hist.quantile(0.2, x) == pytest.approx(0.05)


def test_rank_in_inf_bucket_returns_highest_finite_bound() -> None:
    x = h((0.1, 1.0), (1, 2), 10)
    assert hist.quantile(0.99, x) == 1.0


def test_no_observations_is_unknown_not_zero() -> None:
    assert hist.quantile(0.5, h((0.1,), (0,), 0)) is None
    assert hist.quantile(0.5, None) is None
    assert hist.mean(h((0.1,), (0,), 0)) is None


def test_non_monotonic_buckets_are_made_monotonic() -> None:
    x = h((1.0, 2.0, 3.0), (5, 3, 10), 10)  # a broken page: bucket 2 < bucket 1
    q = hist.quantile(0.4, x)
    assert q is not None and 0 < q <= 1.0


def test_delta_and_add() -> None:
    a = h((1.0, 2.0), (1, 2), 3, 3.0)
    b = h((1.0, 2.0), (4, 6), 8, 10.0)
    d = hist.delta(b, a)
    assert d == h((1.0, 2.0), (3, 4), 5, 7.0)
    assert hist.add(a, d) == b
    assert hist.delta(b, h((5.0,), (1,), 1)) is None


def test_merge_engines_by_adding_buckets_not_averaging_percentiles() -> None:
    fast = h((0.1, 1.0, 10.0), (90, 100, 100), 100)
    slow = h((0.1, 1.0, 10.0), (0, 0, 10), 10)
    merged = hist.add(fast, slow)
    p99 = hist.quantile(0.99, merged)
    assert p99 is not None and p99 > 1.0  # the slow engine's tail shows in the merged p99
    fast_p99, slow_p99 = hist.quantile(0.99, fast), hist.quantile(0.99, slow)
    assert fast_p99 is not None and slow_p99 is not None
    averaged = (fast_p99 + slow_p99) / 2
    assert p99 != pytest.approx(averaged)


def test_a_quantile_stays_within_what_the_mean_allows() -> None:
    # Issue 25: 16 queue times of 0.1 ms, all in vLLM's first bucket (0-0.3 s). Interpolated
    # to the bucket's middle they read p50 150 ms beside a mean of 0.1 ms; at least half of
    # them are as large as the median, so it is at most twice the mean.
    x = h((0.3, 0.5, math.inf), (16, 16, 16), 16, 16 * 0.0001)
    assert hist.quantile(0.5, x) == pytest.approx(0.0002)
    assert hist.quantile(0.99, x) == pytest.approx(0.01)
    # Observations spread across buckets as interpolation assumes: the bound does not bind.
    y = h((0.1, 1.0), (4, 10), 10, 4 * 0.05 + 6 * 0.55)
    assert hist.quantile(0.5, y) == pytest.approx(0.1 + 0.9 * (1 / 6))


def test_a_sum_the_buckets_contradict_bounds_nothing() -> None:
    # A sum below what the lower bucket edges already add up to is not this data's.
    x = h((0.1, 1.0), (0, 10), 10, 0.0)
    assert hist.quantile(0.5, x) == pytest.approx(0.55)
