"""`window: since_start`: the server's own totals, trusted only where they stand for it now.

A server's counters and histograms hold everything since it started; a rule may read them beside
its windows, so a server that has queued every request for an hour says so at vtop's first
poll. They are unknown where that history is not the server as it is now: no start time, a
server younger than a minute, a restart vtop saw, or a load that has fallen away since.
"""

from __future__ import annotations

from vtop.model import Histogram, Scrape, SeriesKey
from vtop.signals.store import Store
from vtop.triage.counts import SINCE_START_MIN_S
from vtop.triage.measure import Snapshot
from vtop.triage.schema import Function, Measure, Operand

EP = "http://127.0.0.1:8000"
T0 = 10_000.0
BOUNDS = (0.5, 1.0, 2.0, 5.0)


def store(*, start: float | None = T0 - 1000.0, tokens_per_s: float = 500.0, polls: int = 20,
          history: float = 600_000.0, restart_at: int | None = None) -> Store:  # fmt: skip
    """A server that generated `history` tokens and 400 preemptions before vtop's first poll,
    queue times of 2 s for 1,000 requests, then `tokens_per_s` while vtop watches."""
    s = Store(EP)
    for i in range(polls):
        base = 0.0 if restart_at is not None and i >= restart_at else history
        scalars = {
            SeriesKey("generation_tokens", "m", "0"): base + tokens_per_s * i,
            SeriesKey("preemptions", "m", "0"): 400.0 if base else 1.0,
        }
        if start is not None:
            scalars[SeriesKey("api_start_time", "", "")] = start
        queue = Histogram(BOUNDS, (0.0, 0.0, 1000.0, 1000.0), 1000.0, 2000.0)
        s.ingest(Scrape(EP, T0 + i, latency_s=0.01, scalars=scalars,
                        histograms={SeriesKey("queue_time", "m", "0"): queue}))  # fmt: skip
    return s


def since_start(s: Store, fn: Function, name: str, q: float | None = None) -> float | None:
    restarts = s.restarts()
    snap = Snapshot(s, {}, restarts[-1] if restarts else None)
    return snap.measure(Measure(fn, Operand(name), 0.0, q, since_start=True))


def test_a_steady_server_says_at_once_what_it_has_counted() -> None:
    s = store()
    # 400 preemptions in the ~1,019 s since the server started
    rate = since_start(s, "rate", "preemptions")
    assert rate is not None and abs(rate - 400 / 1019) < 1e-3
    assert since_start(s, "increase", "preemptions") == 400.0
    assert since_start(s, "histogram_quantile", "queue_time", 0.5) == 1.5  # in the 1-2 s bucket


def test_no_start_time_no_history() -> None:
    assert since_start(store(start=None), "increase", "preemptions") is None


def test_a_server_that_just_started_has_no_history_worth_more_than_the_window() -> None:
    young = store(start=T0 - SINCE_START_MIN_S + 30)
    assert since_start(young, "increase", "preemptions") is None


def test_a_load_that_has_fallen_away_is_judged_on_the_window() -> None:
    # ~590 tokens/s on average since the start; 50/s now: the old history is another load
    fallen = store(tokens_per_s=50.0)
    assert since_start(fallen, "rate", "preemptions") is None
    risen = store(tokens_per_s=5000.0)  # more load now than on average: history says too little
    assert since_start(risen, "increase", "preemptions") == 400.0


def test_a_restart_vtop_saw_ends_the_server_history() -> None:
    assert since_start(store(restart_at=10), "increase", "preemptions") is None
