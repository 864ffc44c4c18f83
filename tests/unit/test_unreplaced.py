"""`unreplaced_share`: the proof that a client held back, from conserved requests.

Issue 25: a fast model behind a starved API server was called client-static-batching, because
bursts of admissions looked like waves. A client that waits for its batch sends nothing while
the batch drains; a closed loop replaces every answer, however late its front end delivers.
"""

from __future__ import annotations

import pytest

from vtop.triage.windowed import unreplaced


def test_a_wave_draining_with_nothing_sent_is_held_back() -> None:
    times = [float(t) for t in range(12)]
    demand: list[float | None] = [16, 16, 14, 12, 9, 6, 3, 1, 0, 16, 16, 16]
    done: list[float | None] = [0, 0, 2, 4, 7, 10, 13, 15, 16, 16, 16, 16]
    assert unreplaced(times, demand, done, share=True) == pytest.approx(1.0)
    assert unreplaced(times, demand, done, share=False) == pytest.approx(1.0)  # one drain


def test_a_closed_loop_in_bursts_is_held_back_only_by_its_front_ends_lag() -> None:
    # the sawtooth of the waves above, but five requests finish every second and a starved
    # front end hands their replacements over late, in bursts: what did not come in within
    # each poll's second (16 of 55), far from a client that replaces nothing
    times = [float(t) for t in range(12)]
    demand: list[float | None] = [16, 16, 14, 12, 9, 6, 3, 1, 0, 16, 16, 16]
    done: list[float | None] = [5.0 * t for t in range(12)]
    assert unreplaced(times, demand, done, share=True) == pytest.approx(16 / 55)


def test_a_closed_loop_that_replaces_each_answer_at_once_holds_nothing_back() -> None:
    times = [float(t) for t in range(12)]
    demand: list[float | None] = [16.0] * 12
    done: list[float | None] = [5.0 * t for t in range(12)]
    assert unreplaced(times, demand, done, share=True) == pytest.approx(0.0)


def test_a_waves_last_finishes_count_beside_the_next_waves_first_arrivals() -> None:
    # A real client's waves (vLLM CPU server, one poll a second): the last ten answers of a
    # wave and the first request of the next one fall in one 2 s stretch; the other fifteen
    # come three seconds later. Nine of those ten went unreplaced, and the six before them:
    # counted per stretch, the ten read as replaced, 6 of 16 in all.
    times = [float(t) for t in range(14)]
    demand: list[float | None] = [16, 16, 16, 16, 16, 15, 13, 11, 10, 6, 1, 1, 1, 16]
    done: list[float | None] = [0, 0, 0, 0, 0, 1, 3, 5, 6, 10, 16, 16, 16, 16]
    assert unreplaced(times, demand, done, share=True) == pytest.approx(15 / 16)


def test_a_fast_waves_drain_is_held_back_though_the_next_wave_follows_within_a_second() -> None:
    # A real client's 5 s waves of 16 (vLLM CPU server, four polls a second): the batch drains
    # in 2 s and the next wave comes half a second after its last answer. Counted in 2 s
    # stretches, the stretch holding the drain's second half held the refill too: 9 of 16,
    # and the 30 s report said OK.
    times = [3.00, 3.25, 3.50, 3.75, 4.00, 4.25, 4.51, 4.76, 5.01, 5.26, 5.51, 5.76, 6.01]
    demand: list[float | None] = [16, 15, 11, 10, 8, 7, 6, 3, 0, 1, 1, 16, 16]
    done: list[float | None] = [0, 1, 5, 6, 8, 9, 10, 13, 16, 16, 16, 16, 16]
    assert unreplaced(times, demand, done, share=True) == pytest.approx(15 / 16)
    assert unreplaced(times, demand, done, share=False) == pytest.approx(15 / 16)


def test_a_replacement_one_poll_late_counts_as_replaced() -> None:
    # four polls a second; each answer is replaced a quarter second later
    times = [0.25 * i for i in range(41)]
    demand: list[float | None] = [16.0 if i % 2 == 0 else 15.0 for i in range(41)]
    done: list[float | None] = [float((i + 1) // 2) for i in range(41)]
    assert unreplaced(times, demand, done, share=True) == pytest.approx(0.0)


def test_unknown_polls_are_skipped_and_too_few_say_nothing() -> None:
    assert unreplaced([0.0, 1.0], [None, 3.0], [0.0, 1.0], share=True) is None
    assert unreplaced([0.0, 5.0], [3.0, 3.0], [0.0, 0.0], share=True) is None  # none finished


def test_a_wave_drains_in_one_run_and_scattered_finishes_do_not_add_up() -> None:
    # The real client's wave above: fifteen of sixteen held back in one run of no arrival.
    times = [float(t) for t in range(14)]
    demand: list[float | None] = [16, 16, 16, 16, 16, 15, 13, 11, 10, 6, 1, 1, 1, 16]
    done: list[float | None] = [0, 0, 0, 0, 0, 1, 3, 5, 6, 10, 16, 16, 16, 16]
    assert unreplaced(times, demand, done, share=False) == pytest.approx(15 / 16)
    # A few long requests a minute, arriving independently: over 40 s ten of them finish
    # unreplaced, but between arrivals, two at most in a row: no drain of the batch.
    times = [2.0 * i for i in range(21)]
    came = [0, 1, 0, 0, 1, 0, 1, 0, 0, 1, 0, 1, 0, 0, 1, 0, 0, 1, 0, 1, 0]
    went = [0, 0, 1, 1, 0, 1, 0, 1, 1, 1, 0, 0, 1, 1, 0, 1, 1, 0, 1, 0, 1]
    demand = [10.0 + sum(came[: i + 1]) - sum(went[: i + 1]) for i in range(21)]
    done = [float(sum(went[: i + 1])) for i in range(21)]
    share = unreplaced(times, demand, done, share=True)
    assert share is not None and share > 0.6  # each finish unreplaced within its stretch
    drain = unreplaced(times, demand, done, share=False)
    assert drain is not None and drain <= 2 / 10
