"""The report window's counter rates: `max` is never below `avg`, nor `last` above `max` (issue 18).

A live report printed `requests finished/s 1.97 (avg) 1.82 (max)`: the average covered the
whole window while the peak left out the seconds after the last closed 10 s bucket, so a
busier tail raised the average above every bucket. The rates come from `Counter`, fed here as
`WindowStats` feeds it, over poll times and increments hypothesis draws.
"""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from vtop.model import SeriesKey
from vtop.report.window import RATE_BUCKET_S, Counter

KEY = SeriesKey("requests_finished", "m", "0", "stop")


def feed(steps: list[tuple[float, float]]) -> dict[str, float | None]:
    """`steps`: (seconds since the previous poll, requests finished in them)."""
    c = Counter()
    t, total = 1000.0, 0.0
    c.add(t, [(KEY, total)])
    for dt, inc in steps:
        t += dt
        total += inc
        c.add(t, [(KEY, total)])
    return c.summary()


def test_a_busier_tail_does_not_lift_the_average_above_the_peak() -> None:
    """Twenty seconds at 1.8/s, then 8 s (no bucket closed yet) at 2.5/s."""
    s = feed([(1.0, 1.8)] * 20 + [(1.0, 2.5)] * 8)
    assert s["avg"] is not None and s["max"] is not None and s["last"] is not None
    assert math.isclose(s["avg"], (20 * 1.8 + 8 * 2.5) / 28)
    assert s["max"] >= s["avg"], s
    assert s["max"] >= s["last"] > 1.8  # the latest 10 s and more: the busier tail counts


def test_a_one_poll_blip_is_still_not_a_peak() -> None:
    """A burst in one poll of a long steady window: the peak is a bucket's, not the blip's."""
    s = feed([(1.0, 2.0)] * 59 + [(1.0, 40.0)] + [(1.0, 2.0)] * 60)
    assert s["max"] is not None and s["max"] < 6.0


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(0.05, 3 * RATE_BUCKET_S, allow_nan=False),
            st.floats(0.0, 500.0, allow_nan=False),
        ),
        min_size=1,
        max_size=120,
    )
)
def test_max_is_at_least_avg_and_last(steps: list[tuple[float, float]]) -> None:
    s = feed(steps)
    avg, peak, last = s["avg"], s["max"], s["last"]
    assert avg is not None and peak is not None and last is not None
    slack = 1e-9 * max(1.0, abs(peak))  # float rounding of a weighted mean, nothing more
    assert peak + slack >= avg, s
    assert peak + slack >= last, s
