"""The store: windows, Prometheus rate semantics, resets, aggregates, missing data."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vtop.model import ALL, GpuReading, GpuStatus, Histogram, Scrape, SeriesKey
from vtop.signals.store import Store

EP = "http://127.0.0.1:8000"


def scrape(
    t: float, ok: bool = True, hists: dict[SeriesKey, Histogram] | None = None, **values: float
) -> Scrape:
    scalars = {}
    for name, v in values.items():
        sig, _, engine = name.partition("__")
        scalars[SeriesKey(sig, "m", engine or "0", "")] = v
    if not ok:
        return Scrape(EP, t, error="refused")
    return Scrape(EP, t, latency_s=0.01, size_bytes=100, scalars=scalars, histograms=hists or {})


def test_missing_is_none_never_zero() -> None:
    s = Store(EP)
    assert s.last("running") is None
    s.ingest(scrape(1.0, running=3))
    assert s.last("running") == 3
    assert s.last("waiting") is None
    s.ingest(scrape(2.0, ok=False))
    assert s.last("running") is None
    assert s.last("up") == 0.0
    assert s.values("running") == [3.0, None]
    assert s.avg("running") == 3.0


def test_rate_over_a_steady_counter() -> None:
    s = Store(EP)
    for i in range(61):
        s.ingest(scrape(float(i), generation_tokens=100.0 * i))
    assert s.rate("generation_tokens", 60) == pytest.approx(100.0, rel=0.02)
    assert s.per_second("generation_tokens", 10) == pytest.approx(100.0)
    assert s.increase("generation_tokens", 30) == pytest.approx(3000.0, rel=0.05)


def test_counter_reset_never_gives_negative_rate_and_is_an_event() -> None:
    s = Store(EP)
    events = []
    for i, v in enumerate([100, 200, 300, 10, 110, 210]):
        events += s.ingest(scrape(float(i), generation_tokens=v))
    assert [e.kind for e in events] == ["restart"]
    assert events[0].t == 3.0
    assert s.per_second("generation_tokens") == pytest.approx((200 + 210) / 5)
    r = s.rate("generation_tokens", 5)
    assert r is not None and r > 0
    assert s.restarts() == [3.0]


def test_too_few_samples_give_no_rate() -> None:
    s = Store(EP)
    s.ingest(scrape(0.0, generation_tokens=5))
    assert s.rate("generation_tokens", 60) is None
    assert s.per_second("generation_tokens") is None


def test_aggregates_sum_counts_and_take_max_kv() -> None:
    s = Store(EP)
    s.ingest(scrape(0.0, running__0=3, running__1=5, kv_usage__0=0.2, kv_usage__1=0.9))
    assert s.last("running") == 8
    assert s.last("kv_usage") == 0.9
    assert s.last(SeriesKey("running", "m", "1", "")) == 5
    assert s.engines() == [("m", "0"), ("m", "1")]


def test_aggregate_counter_survives_one_engine_resetting() -> None:
    s = Store(EP)
    for i in range(5):
        e1 = 100 * i if i < 3 else 50 * (i - 3)
        s.ingest(scrape(float(i), generation_tokens__0=100 * i, generation_tokens__1=e1))
    assert s.per_second("generation_tokens") == pytest.approx((400 + 200 + 50) / 4)


def test_window_statistics() -> None:
    s = Store(EP)
    for i, v in enumerate([1, 5, 3, 9, 2]):
        s.ingest(scrape(float(i), waiting=v))
    assert s.max("waiting", 10) == 9
    assert s.min("waiting", 10) == 1
    assert s.avg("waiting", 1.5) == pytest.approx(5.5)  # the last two polls
    assert s.quantile(0.5, "waiting", 10) == 3
    assert s.count("waiting", 10) == 5


def test_capacity_bounds_memory() -> None:
    s = Store(EP, capacity=200)
    k = SeriesKey("ttft", "m", "0", "")
    for i in range(1000):
        h = Histogram((1.0,), (float(i),), float(i), float(i))
        s.ingest(scrape(float(i), hists={k: h}, running=i))
    assert 200 <= len(s) <= 200 + 25
    assert len(s.values("running")) == len(s) == len(s.hist_values("ttft"))
    assert s.last("running") == 999
    assert s.min("running") == 1000 - len(s)
    assert s.hist_delta("ttft", 10.5) == Histogram((1.0,), (10.0,), 10.0, 10.0)


def test_histogram_window_quantile_uses_bucket_deltas() -> None:
    s = Store(EP)
    k = SeriesKey("ttft", "m", "0", "")
    old = Histogram((0.1, 1.0), (100, 100), 100, 5.0)  # long ago: all fast
    new = Histogram((0.1, 1.0), (100, 110), 110, 10.0)  # in the window: 10 slow ones
    s.ingest(scrape(0.0, hists={k: old}))
    s.ingest(scrape(1.0, hists={k: new}))
    p50 = s.hist_quantile(0.5, "ttft", 60)
    assert p50 is not None and 0.1 < p50 <= 1.0
    assert s.hist_mean("ttft", 60) == pytest.approx(0.5)


def test_histogram_reset_is_adjusted() -> None:
    s = Store(EP)
    k = SeriesKey("ttft", "m", "0", "")
    s.ingest(scrape(0.0, hists={k: Histogram((1.0,), (10,), 10, 1.0)}))
    s.ingest(scrape(1.0, hists={k: Histogram((1.0,), (2,), 3, 1.0)}))  # restarted
    d = s.hist_delta("ttft")
    assert d is not None and d.count == 3


def test_gpu_readings_become_series() -> None:
    s = Store(EP)
    gpu = GpuStatus((GpuReading(0, "RTX 4090", util_pct=55.0, temp_c=None),))
    s.ingest(scrape(0.0, running=1), gpu)
    assert s.last(SeriesKey("gpu_util", ALL, ALL, "0")) == 55.0
    assert s.last(SeriesKey("gpu_temp", ALL, ALL, "0")) is None


@given(st.lists(st.floats(min_value=0, max_value=1e9, allow_nan=False), min_size=2, max_size=60))
def test_rates_are_never_negative(values: list[float]) -> None:
    s = Store(EP)
    for i, v in enumerate(values):
        s.ingest(scrape(float(i), preemptions=v))
    for w in (5.0, 30.0, 120.0):
        r = s.rate("preemptions", w)
        assert r is None or (r >= 0 and math.isfinite(r))
    p = s.per_second("preemptions")
    assert p is None or p >= 0


def test_hist_values_are_aligned_with_times() -> None:
    s = Store(EP)
    k = SeriesKey("ttft", "m", "0", "")
    for i in range(5):
        h = Histogram((0.1, 1.0), (float(i), float(2 * i)), float(2 * i), float(i))
        s.ingest(scrape(float(i), hists={k: h}) if i != 2 else scrape(float(i), ok=False))
    got = s.hist_values("ttft", 2.5)
    assert len(got) == len(s.times(2.5)) == 3
    assert got[0] is None  # the poll at t=2 failed: unknown, not an empty histogram
    assert got[1] is not None and got[1].count == 6.0
    assert got[-1] is not None and got[-1].count == 8.0
    assert list(s.hist_values("itl")) == [None] * 5


def test_nvml_and_a_page_naming_the_same_gpu_count_it_once() -> None:
    s = Store(EP)
    page_gpu = {SeriesKey("gpu_util", "", "", "0"): 10.0, SeriesKey("gpu_util", "", "", "1"): 70.0}
    gpu = GpuStatus((GpuReading(0, "RTX 4090", util_pct=55.0),))
    for t in range(3):
        s.ingest(Scrape(EP, float(t), latency_s=0.01, scalars=page_gpu), gpu)
    assert s.values(SeriesKey("gpu_util", ALL, ALL, "0")) == [55.0, 55.0, 55.0]
    assert s.values(SeriesKey("gpu_util", ALL, ALL, "1")) == [70.0, 70.0, 70.0]
    assert s.last(SeriesKey("gpu_util", ALL, ALL, ALL)) == 70.0  # GPUs combine by max
    assert len(s.times()) == 3


def test_a_window_shorter_than_float_resolution_still_holds_the_latest_poll() -> None:
    s = Store(EP)
    for i in range(3):
        s.ingest(scrape(1.8e9 + i, running=float(i)))
    assert s.values("running", 1e-9) == [2.0]
    assert s.last("running") == 2.0


def test_a_second_engine_gives_the_aggregate_its_own_column() -> None:
    s = Store(EP)
    k0, k1 = SeriesKey("ttft", "m", "0", ""), SeriesKey("ttft", "m", "1", "")
    s.ingest(scrape(0.0, running__0=2, hists={k0: Histogram((1.0,), (1,), 1, 0.5)}))
    s.ingest(scrape(1.0, running__0=3, hists={k0: Histogram((1.0,), (2,), 2, 1.0)}))
    # engine 1 appears: the aggregate keeps engine 0's past and sums from now on
    s.ingest(
        scrape(
            2.0,
            running__0=3,
            running__1=4,
            hists={k0: Histogram((1.0,), (2,), 2, 1.0), k1: Histogram((1.0,), (5,), 5, 2.0)},
        )
    )
    assert s.values("running") == [2.0, 3.0, 7.0]
    assert s.values(SeriesKey("running", "m", "0", "")) == [2.0, 3.0, 3.0]
    assert [h.count if h else None for h in s.hist_values("ttft")] == [1, 2, 7]
    assert s.hist_values(k0)[2] == Histogram((1.0,), (2,), 2, 1.0)
    assert s.hist_values("ttft").present() == [True, True, True]
