"""Little's law over a window (`vtop.signals.queueing`), read by the rules and the self-check
alike, on windows recorded from the real vLLM CPU server (tests/fixtures/real-regimes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vtop.signals.queueing import queue_seen
from vtop.signals.store import key
from vtop.triage.columns import Columns
from vtop.triage.windowed import window_value
from vtop.whatif.check import queue_unjudged
from vtop.whatif.watched import read_trace

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "real-regimes"
WINDOW_S = 300.0


def _seen(trace: str) -> tuple[float | None, float | None, str]:
    """(the library's ratio, the rules' `queue_seen`, the self-check's clause) of one window."""
    watched = read_trace(str(FIXTURES / trace))
    store = watched.store
    seen = queue_seen(store, WINDOW_S, key("waiting"), key("queue_time"))
    rules = window_value("queue_seen", WINDOW_S, Columns(store, {}))
    return (seen.ratio if seen else None), rules, queue_unjudged(store, WINDOW_S)


def test_requests_that_queued_before_the_window_read_far_under_the_gauge() -> None:
    """The KV-exhausted server 45 s into its load: ~30 waiting at every poll, and the queue
    times of the load's first requests, admitted at once."""
    ratio, rules, said = _seen("kv-nofp8-slowhost.vtrace")
    assert ratio is not None and ratio > 100  # 30.8 waiting; the queue times: 73 us a second
    assert rules == pytest.approx(ratio)
    assert said.startswith("queue time not judged: ")


def test_a_steady_queue_reads_the_same_on_both_sides() -> None:
    """24 clients on 2 seats: the queue times of the window add up to its waiting gauge."""
    ratio, rules, said = _seen("budget2-slowhost.vtrace")
    assert ratio is not None and 0.5 <= ratio <= 2
    assert rules == pytest.approx(ratio)
    assert said == ""


def test_a_window_without_queue_times_has_no_ratio() -> None:
    watched = read_trace(str(FIXTURES / "budget2-slowhost.vtrace"))
    assert queue_seen(watched.store, 0.0, key("waiting"), key("queue_time")) is None
