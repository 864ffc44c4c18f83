"""Where the load of a window changed: the one question over a store that both the rules and
the what-if ask before they read a window as one load.

Forty clients, then four: a window across both describes neither. The rules' engine reads a
rule's window only after the change (`vtop.triage.engine`), the what-if fits its workload to
the part after it (`vtop.whatif.workload.steady_window`). A change is a level that moved, by
`LOAD_CHANGE` times, with at least `MIN_STEADY_S` on either side; a load that swings (waves,
a burst every minute) is none. The load is the number of requests in the server, running plus
waiting, read from the aggregate series unless a caller names one engine's.
"""

from __future__ import annotations

from dataclasses import dataclass

from vtop.model import SeriesKey
from vtop.signals.store import Store, key

RUNNING = key("running")
WAITING = key("waiting")
LOAD_CHANGE = 2.0
"""Requests in the server before and after a point differing by this factor: the load changed."""
MIN_STEADY_S = 30.0
"""The shortest span on either side of a load change that counts as a load of its own."""


@dataclass(frozen=True, slots=True)
class LoadChange:
    """The point of a window where the load changed most, and the loads either side."""

    t: float
    before: float
    after: float
    span_s: float
    """Seconds from the change to the window's last poll: the new load's history."""


def load_change(
    store: Store, window_s: float, running: SeriesKey = RUNNING, waiting: SeriesKey = WAITING
) -> LoadChange | None:
    """The largest change of load in the last `window_s`: the point where the mean number of
    requests in the server (running + waiting) before and after differ most, if by
    `LOAD_CHANGE` times (each side + 1, so 0 against 0.5 is no change) with at least
    `MIN_STEADY_S` on either side; None when the load held. Forty clients, then four: a window
    across both describes neither, and what held under the first is not the second's."""
    times = store.times(window_s)
    running_seen = store.values(running, window_s)
    waiting_seen = store.values(waiting, window_s)
    seen = [
        (t, r + w)
        for t, r, w in zip(times, running_seen, waiting_seen, strict=True)
        if r is not None and w is not None
    ]
    if len(seen) < 4:
        return None
    begin, end = seen[0][0], seen[-1][0]
    total = sum(load for _, load in seen)
    before_sum = 0.0
    best: tuple[float, int, float, float] | None = None
    for i, (t, load) in enumerate(seen):
        if i and t - begin >= MIN_STEADY_S and end - t >= MIN_STEADY_S:
            before = before_sum / i
            after = (total - before_sum) / (len(seen) - i)
            factor = (max(before, after) + 1) / (min(before, after) + 1)
            if factor >= LOAD_CHANGE and (best is None or factor > best[0]):
                best = (factor, i, before, after)
        before_sum += load
    if best is None:
        return None
    _, i, before, after = best
    # A level that moved, not a load that swings: the two sides barely overlap (nine polls
    # in ten of the quieter side below nine in ten of the busier). Waves a minute apart, or
    # a burst every minute, put quiet polls on both sides of any split.
    low, high = ([v for _, v in seen[:i]], [v for _, v in seen[i:]])
    if before > after:
        low, high = high, low
    if _quantile(0.9, low) >= _quantile(0.1, high):
        return None
    t = seen[i][0]
    return LoadChange(t, before, after, end - t)


def _quantile(q: float, values: list[float]) -> float:
    """Nearest-rank quantile of a non-empty list."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
