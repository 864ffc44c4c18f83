"""Warm-up polling: four polls a second for the first 15 s, only where the server answers fast.

The pacer is what the TUI, headless reports and recordings ask for the delay to the next poll;
the simulator, told each pace, advances its clock by it.
"""

from __future__ import annotations

from vtop.model import Frame, Scrape
from vtop.sources.pacing import FAST_ANSWER_S, WARM_INTERVAL_S, WARM_UP_S, Pacer
from vtop.sources.sim import SimSource


def frame(t: float, *latencies: float | None) -> Frame:
    scrapes = tuple(
        Scrape(f"http://h{i}", t, latency_s=lat)
        if lat is not None
        else Scrape(f"http://h{i}", t, latency_s=0.8, error="no answer within 0.8 s")
        for i, lat in enumerate(latencies or (0.01,))
    )
    return Frame(t, scrapes)


def test_a_fast_server_is_polled_four_times_a_second_for_15_s_then_at_the_interval() -> None:
    pacer = Pacer(1.0)
    t, delays = 100.0, []
    while t < 100.0 + WARM_UP_S + 5:
        delays.append((t - 100.0, pacer.next_after(frame(t, 0.01))))
        t += delays[-1][1]
    warm = [d for at, d in delays if at < WARM_UP_S]
    assert warm == [WARM_INTERVAL_S] * 60
    assert all(d == 1.0 for at, d in delays if at >= WARM_UP_S)
    assert not pacer.warming


def test_a_slow_or_failed_answer_ends_the_warm_up_for_good() -> None:
    slow = Pacer(1.0)
    assert slow.next_after(frame(0.0, 0.01)) == WARM_INTERVAL_S
    assert slow.next_after(frame(0.25, FAST_ANSWER_S * 2)) == 1.0
    assert slow.next_after(frame(1.25, 0.01)) == 1.0, "a slow front end is not hurried again"
    failed = Pacer(1.0)
    assert failed.next_after(frame(0.0, 0.01, None)) == 1.0  # one of two endpoints failed
    assert failed.next_after(frame(1.0, 0.01, 0.01)) == 1.0


def test_nothing_before_a_first_answer_and_never_faster_than_the_interval() -> None:
    pacer = Pacer(2.0)
    assert pacer.next_after(frame(0.0, None)) == 2.0 and not pacer.warming
    assert pacer.next_after(frame(2.0, 0.01)) == WARM_INTERVAL_S and pacer.warming
    fast = Pacer(0.1)
    assert fast.next_after(frame(0.0, 0.01)) == 0.1
    off = Pacer(1.0, warm_up_s=0.0)  # a source that gains nothing from it (a trace)
    assert off.next_after(frame(0.0, 0.01)) == 1.0


def test_the_simulator_advances_by_the_pace_it_is_told() -> None:
    source = SimSource.scenario("healthy", seed=0, epoch=1_000.0, in_thread=False)
    first = source.poll_now().t
    source.pace(WARM_INTERVAL_S)
    second = source.poll_now().t
    third = source.poll_now().t  # the pace holds for one poll only
    assert 0.25 <= second - first < 0.3
    assert 1.0 <= third - second < 1.05
