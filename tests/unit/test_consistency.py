"""Issue 25's consistency layer: no printed figure that the data cannot support.

- a histogram quantile lies where observations could be: at least its bucket's lower edge, at
  most the highest finite bound, and at most mean / (1 - q) (a share 1 - q of non-negative
  observations is at least the quantile);
- a part of a request's latency is no longer than its whole at the same quantile, whatever
  each histogram's buckets (queue <= TTFT <= e2e);
- on every simulator scenario, a report's latencies keep that order, its shares stay within
  0-100 %, and a finding's summary and evidence print no percentage above 100.
"""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vtop.figures import within_wholes
from vtop.model import Histogram
from vtop.report.document import signals_of
from vtop.report.run import simulated_document
from vtop.signals import histogram as hist
from vtop.sim.families import REQUEST_LATENCY_V1, TTFT_V1
from vtop.sim.scenarios import SCENARIOS
from vtop.sources.sim import DEMO_RUNNING_S, SimSource

# vLLM's request-latency buckets, and the finer ones of its TTFT histogram: two histograms of
# the same requests rarely share their bounds.
LATENCY_BOUNDS = (*REQUEST_LATENCY_V1, math.inf)
TTFT_BOUNDS = (*TTFT_V1, math.inf)
QUANTILES = (0.5, 0.9, 0.99)


def histogram(samples: list[float], bounds: tuple[float, ...]) -> Histogram:
    buckets = tuple(float(sum(1 for s in samples if s <= b)) for b in bounds)
    return Histogram(bounds, buckets, float(len(samples)), float(sum(samples)))


seconds = st.floats(min_value=0.0, max_value=600.0, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(st.lists(seconds, min_size=1, max_size=60), st.sampled_from(QUANTILES))
def test_a_quantile_lies_where_the_observations_could_be(samples: list[float], q: float) -> None:
    h = histogram(samples, LATENCY_BOUNDS)
    value = hist.quantile(q, h)
    assert value is not None and value >= 0.0
    assert value <= max(b for b in LATENCY_BOUNDS if math.isfinite(b))
    mean = sum(samples) / len(samples)
    assert value <= mean / (1 - q) + 1e-9


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(seconds, seconds, seconds), min_size=1, max_size=60),
    st.sampled_from(QUANTILES),
)
def test_a_part_is_never_longer_than_its_whole(
    requests: list[tuple[float, float, float]], q: float
) -> None:
    # each request: its queue time, then its prefill, then its decode
    queue = [a for a, _, _ in requests]
    ttft = [a + b for a, b, _ in requests]
    e2e = [a + b + c for a, b, c in requests]
    figures = within_wholes(
        {
            "queue_time": hist.quantile(q, histogram(queue, LATENCY_BOUNDS)),
            "ttft": hist.quantile(q, histogram(ttft, TTFT_BOUNDS)),
            "e2e": hist.quantile(q, histogram(e2e, LATENCY_BOUNDS)),
        }
    )
    queue_q, ttft_q, e2e_q = figures["queue_time"], figures["ttft"], figures["e2e"]
    assert queue_q is not None and ttft_q is not None and e2e_q is not None
    assert queue_q <= ttft_q <= e2e_q


PERCENT = re.compile(r"(\d+(?:\.\d+)?)%")


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_every_scenario_prints_only_figures_that_can_be(scenario: str) -> None:
    source = SimSource.scenario(scenario, seed=0, interval_s=1.0, running_s=DEMO_RUNNING_S)
    doc = simulated_document(source, name=scenario, duration_s=45.0)
    latency = doc["latency"]
    for q in ("mean", "p50", "p90", "p99"):
        chain = [latency[n][q] for n in ("queue_time", "ttft", "e2e") if n in latency]
        known = [v for v in chain if v is not None]
        assert known == sorted(known), (q, chain)
        if q == "mean":
            continue
        for stats in latency.values():
            mean, value = stats["mean"], stats[q]
            if value is not None and mean is not None:
                bound = {"p50": 2.0, "p90": 10.0, "p99": 100.0}[q]
                assert value <= mean * bound * (1 + 1e-9), (q, stats)
    signals = signals_of(doc["signals"])
    if signals is not None:
        kv = signals["kv_usage"]
        shown = [kv["avg"], kv["max"], kv["last"]]
        assert all(0.0 <= v <= 1.0 for v in shown if v is not None), kv
    for f in doc["findings"]:
        said = [f["summary"], *(e["value"] for e in f["evidence"])]
        for text in said:
            for number in PERCENT.findall(text):
                assert float(number) <= 100.0, (f["rule"], text)
