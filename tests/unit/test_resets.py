"""The one reset rule: what the store, the live source and the report's figures call a counter
reset and a restart (`vtop.signals.resets`), read the same way by all three."""

from __future__ import annotations

import math

from vtop.model import Histogram, Scrape, SeriesKey
from vtop.report.window import Counter
from vtop.signals import resets
from vtop.signals.store import Store

GEN = SeriesKey("generation_tokens", "m", "", "")
CPU = SeriesKey("api_cpu_seconds", "", "", "")
START = SeriesKey("api_start_time", "", "", "")
RUNNING = SeriesKey("running", "m", "", "")


def test_a_counter_resets_when_it_goes_down_and_only_then() -> None:
    assert resets.counter_reset(10.0, 3.0)
    assert not resets.counter_reset(10.0, 10.0) and not resets.counter_reset(10.0, 11.0)
    assert not resets.counter_reset(None, 0.0) and not resets.counter_reset(math.nan, 0.0)


def test_a_histogram_resets_or_is_rebucketed() -> None:
    old = Histogram((0.1, 1.0), (2.0, 5.0, 6.0), 6.0, 3.0)
    fewer = Histogram((0.1, 1.0), (1.0, 1.0, 1.0), 1.0, 0.1)
    other = Histogram((0.5,), (1.0, 1.0), 1.0, 0.1)
    assert resets.histogram_change(old, fewer) == "reset"
    assert resets.histogram_change(old, other) == "rebucketed"
    assert resets.histogram_change(old, old) is None and resets.histogram_change(None, old) is None


def test_a_restart_is_a_watched_counter_down_or_a_new_start_time() -> None:
    before = {GEN: 100.0, CPU: 50.0, START: 1000.0, RUNNING: 8.0}
    assert not resets.restarted({GEN: 120.0, CPU: 51.0, START: 1000.0}, before.get)
    assert resets.restarted({GEN: 5.0}, before.get)
    assert resets.restarted({CPU: 1.0}, before.get)
    assert resets.restarted({START: 2000.0}, before.get)
    assert not resets.restarted({RUNNING: 0.0}, before.get)  # a gauge may go down
    assert not resets.restarted({START: 2000.0}, lambda k: math.nan)  # never seen: no change


def test_the_store_and_the_reports_figures_agree_on_a_restart() -> None:
    store = Store("http://x")
    counter = Counter()
    events = []
    for t, tokens in enumerate((100.0, 150.0, 20.0, 60.0)):
        events += store.ingest(Scrape("http://x", float(t), scalars={GEN: tokens}))
        counter.add(float(t), [(GEN, tokens)])
    assert [e.kind for e in events] == ["restart"] and counter.resets == 1
    assert store.last(SeriesKey("generation_tokens", "*", "*", "")) == 60.0
    assert store.values(GEN) == [100.0, 150.0, 170.0, 210.0]  # reset-adjusted
    assert counter.now == (3.0, 210.0)
