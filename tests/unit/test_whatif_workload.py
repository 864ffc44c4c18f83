"""The workload estimate: length histograms in, log-normal distributions out; a closed loop
told from open-loop arrivals by its queue; and each part said to be read or assumed."""

from __future__ import annotations

import math
import random

import pytest

from vtop.model import Histogram, Scrape, SeriesKey
from vtop.signals.load import load_change
from vtop.signals.store import Store
from vtop.sim.workload import ClosedLoop, Lengths, Poisson
from vtop.whatif.workload import estimate, fit_lengths, steady_window

EP = "http://127.0.0.1:8000"
GRID = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0, 10000.0)
"""vLLM's request_prompt_tokens buckets (a 1-2-5 grid up to max_model_len)."""


def histogram_of(samples: list[int]) -> Histogram:
    buckets = tuple(float(sum(1 for s in samples if s <= b)) for b in GRID)
    return Histogram(GRID, buckets, float(len(samples)), float(sum(samples)))


@pytest.mark.parametrize(("mean", "sigma"), [(600.0, 0.6), (250.0, 0.3), (120.0, 1.0)])
def test_a_log_normal_comes_back_from_its_buckets(mean: float, sigma: float) -> None:
    rng = random.Random(7)
    samples = [Lengths(mean, sigma).sample(rng) for _ in range(4000)]
    fitted = fit_lengths(histogram_of(samples))
    assert fitted is not None
    assert fitted.mean == pytest.approx(sum(samples) / len(samples))
    assert fitted.sigma == pytest.approx(sigma, abs=0.06)


def test_one_length_is_a_point_and_no_observations_are_none() -> None:
    fitted = fit_lengths(histogram_of([64] * 100))
    assert fitted is not None
    assert (fitted.mean, fitted.sigma) == (64.0, 0.0)
    assert 50 < fitted.lo <= 64 <= fitted.hi == 100
    assert fit_lengths(Histogram(GRID, (0.0,) * len(GRID), 0.0, 0.0)) is None
    assert fit_lengths(None) is None


def _key(signal: str, label: str = "") -> SeriesKey:
    return SeriesKey(signal, "m", "0", label)


def store_of(
    waiting: list[float],
    *,
    running: float | list[float] = 16.0,
    finished_per_s: float = 2.0,
    with_lengths: bool = True,
) -> Store:
    """One poll a second: the gauges given (`running` one value or one per poll), requests
    finishing at a steady rate (all "stop"), and, with lengths, prompts of 600 and answers of
    200 tokens."""
    runs = running if isinstance(running, list) else [running] * len(waiting)
    store = Store(EP)
    prompt = histogram_of([])
    gen = histogram_of([])
    for i, w in enumerate(waiting):
        done = finished_per_s * i
        scalars = {
            _key("running"): runs[i],
            _key("waiting"): w,
            _key("requests_finished", "stop"): done,
            _key("requests_finished", "length"): 0.0,
        }
        hists: dict[SeriesKey, Histogram] = {}
        if with_lengths:
            n = int(done)
            prompt = histogram_of([600] * n)
            gen = histogram_of([200] * n)
            hists = {_key("prompt_len"): prompt, _key("generation_len"): gen}
        store.ingest(Scrape(EP, float(i), latency_s=0.01, scalars=scalars, histograms=hists))
    return store


def test_a_steady_queue_is_a_closed_loop_of_those_in_the_server() -> None:
    est = estimate(store_of([40.0 + (i % 3) for i in range(120)]), 120.0)
    assert est.loop == "closed"
    assert isinstance(est.workload, ClosedLoop)
    assert est.workload.clients == 57  # 16 running + 41 waiting on average
    assert any("think time" in a for a in est.assumed)


def poisson_counts(mean: float, n: int, seed: int = 3) -> list[float]:
    """`n` draws of a Poisson count: what an open loop keeps in a server with room."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k, p, limit = 0, 1.0, math.exp(-mean)
        while (p := p * rng.random()) > limit:
            k += 1
        out.append(float(k))
    return out


def test_an_empty_queue_with_a_spreading_count_is_open_loop_at_the_finish_rate() -> None:
    est = estimate(store_of([0.0] * 120, running=poisson_counts(5.0, 120)), 120.0)
    assert est.loop == "open"
    assert isinstance(est.workload, Poisson)
    assert est.workload.rate == pytest.approx(2.0)


def test_an_empty_queue_with_the_count_held_is_a_closed_loop_of_that_count() -> None:
    # 16 clients in front of 16 seats: 16 in the server but for a poll between two requests
    held = [15.0 if i % 17 == 0 else 16.0 for i in range(120)]
    est = estimate(store_of([0.0] * 120, running=held), 120.0)
    assert est.loop == "closed"
    assert isinstance(est.workload, ClosedLoop)
    assert est.workload.clients == 16
    assert any("queue empty in 100% of polls, 16 requests in the server" in r for r in est.read)
    # one poll in five well below it is no longer held: arrivals that come and go
    loose = [12.0 if i % 5 == 0 else 16.0 for i in range(120)]
    assert estimate(store_of([0.0] * 120, running=loose), 120.0).loop == "open"
    # 24 clients on a slow host: one or two often between requests, in the API server
    slow = [22.0 if i % 8 == 0 else 23.0 if i % 2 else 24.0 for i in range(120)]
    wide = estimate(store_of([0.0] * 120, running=slow), 120.0).workload
    assert isinstance(wide, ClosedLoop) and wide.clients == 23
    # and a Poisson count as high spreads past a tenth of its top
    assert estimate(store_of([0.0] * 120, running=poisson_counts(22.0, 120)), 120.0).loop == "open"


def test_a_single_request_in_and_out_is_no_closed_loop() -> None:
    est = estimate(store_of([0.0] * 120, running=[float(i % 2) for i in range(120)]), 120.0)
    assert est.loop == "open"


def test_a_growing_queue_is_open_loop_above_the_service_rate() -> None:
    est = estimate(store_of([float(i) for i in range(120)]), 120.0)
    assert est.loop == "open"
    assert isinstance(est.workload, Poisson)
    assert est.workload.rate == pytest.approx(3.0, rel=0.02)  # 2 finished + 1 more queued a second


def test_lengths_and_finish_reasons_are_read_from_the_metrics() -> None:
    est = estimate(store_of([0.0] * 60), 60.0)
    assert est.prompt.mean == pytest.approx(600.0)
    assert est.output.mean == pytest.approx(200.0)
    assert est.length_share == 0.0
    assert any(r.startswith("prompt lengths") for r in est.read)
    assert any(r.startswith("finish reasons") for r in est.read)
    assert any(a.startswith("max_tokens") for a in est.assumed)


def test_without_length_histograms_the_lengths_are_assumed() -> None:
    est = estimate(store_of([0.0] * 60, with_lengths=False), 60.0)
    assert any(a.startswith("prompt lengths") for a in est.assumed)
    assert any(a.startswith("generation lengths") for a in est.assumed)
    assert not any(r.startswith("prompt lengths") for r in est.read)
    assert math.isfinite(est.prompt.mean)


def test_a_load_that_changed_is_estimated_from_after_the_change() -> None:
    # 90 s of 16 running + 40 waiting, then 60 s of 16 running and nothing waiting
    store = store_of([40.0 + (i % 3) for i in range(90)] + [0.0] * 60)
    span, said = steady_window(store, 150.0)
    assert span == pytest.approx(59.0, abs=1.0) and said is not None
    assert "from 57.0 to 16.0 requests in the server" in said
    after, whole = estimate(store, span).workload, estimate(store, 150.0).workload
    assert isinstance(after, ClosedLoop) and after.clients == 16  # held in the server, no queue
    assert isinstance(whole, ClosedLoop) and whole.clients == 41  # the whole window mixes both


def test_a_steady_load_or_a_short_change_keeps_the_whole_window() -> None:
    assert steady_window(store_of([40.0 + (i % 3) for i in range(150)]), 150.0) == (150.0, None)
    # a change 20 s before the end: too short to be a load of its own
    assert steady_window(store_of([40.0] * 130 + [0.0] * 20), 150.0) == (150.0, None)


def test_a_load_that_swings_is_no_change() -> None:
    # Issue 25: a burst every minute (18 s at the cap with a queue, 42 s quiet) or waves that
    # drain and refill put both levels on each side of any split: no change of load, so the
    # rules keep judging the whole window.
    bursts = [(40.0 if i % 60 < 18 else 2.0) for i in range(300)]
    assert load_change(store_of(bursts), 300.0) is None
    waves = [max(0.0, 32.0 - 8 * ((i % 60) // 10)) for i in range(180)]
    assert load_change(store_of(waves), 180.0) is None
    # forty clients, then four: a level that moved
    change = load_change(store_of([24.0] * 200 + [0.0] * 60), 260.0)
    assert change is not None and change.span_s == pytest.approx(59.0, abs=1.0)
