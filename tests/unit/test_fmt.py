"""How a latency reads on the screen (`vtop.fmt.seconds`): the unit that keeps three digits,
and no latency at all as `0s` (a predicted queue that empties read `0µs`, as if something
still waited)."""

from __future__ import annotations

import math

import pytest

from vtop import fmt


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0.0, "0s"),
        (4e-7, "0µs"),
        (0.00085, "850µs"),
        (0.012, "12ms"),
        (1.234, "1.23s"),
        (125.0, "2m05s"),
        (None, fmt.DASH),
        (math.nan, fmt.DASH),
    ],
)
def test_a_latency_reads_in_the_unit_that_fits_it(value: float | None, shown: str) -> None:
    assert fmt.seconds(value) == shown
