"""Measures of one window of polls: functions over a column, and the window-derived values.

Two kinds of measure read a window the same way whatever the rule: a function of a gauge's
column (`last`, `avg_over_time`, `quantile_over_time`, ...) and the `value:` of a signal that
exists only over a window (`derived.DERIVED`'s "window" kind: `prefix_hit_rate`,
`decode_concurrency`, `wave_share`, ...). Both are plain functions of the evaluation's
`Columns` and store, so `Snapshot` only dispatches to them and caches what they return;
those made of counters and histograms alone are `counts.counted_value`, which also reads them
since the server started.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from vtop.signals.queueing import queue_seen
from vtop.signals.store import Store, key
from vtop.triage.columns import Column, Columns
from vtop.triage.counts import Window, counted_value, ratio
from vtop.triage.derived import SINCE_START_VALUES
from vtop.triage.schema import Operand

WAVE_GAIN = 0.4
WAVE_FROM = 0.6
"""A climb of demand refills the server when it gains at least `WAVE_GAIN` of the peak (p95)
from no higher than `WAVE_FROM` of it: at one poll a second a wave of the batch's size is seen
from wherever the draining batch was at the last poll before it."""


REPLACED_WITHIN_S = 0.5
"""How late a request may reach the server and still replace an answer: a closed-loop
client's next request comes within it (a poll or two later at four polls a second), while a
client waiting for its batch sends nothing until the batch has drained. At one poll a second
only the same interval counts: a wave's refill, the poll after its drain, replaces nothing."""
POLL_JITTER_S = 0.05
"""Polls a second apart land up to this much late; one interval later is still later."""


def quantile(q: float, values: Sequence[float]) -> float | None:
    """`quantile_over_time`: linear interpolation between order statistics (as the store)."""
    if not values:
        return None
    vs = sorted(values)
    pos = max(0.0, min(1.0, q)) * (len(vs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(vs) - 1)
    return vs[lo] + (vs[hi] - vs[lo]) * (pos - lo)


def over_time(fn: str, col: Column, q: float | None) -> float | None:
    """`last` or a `*_over_time` function of a gauge's (or per-poll derived signal's) column."""
    if fn == "last":
        return col[-1] if col else None
    vals = [v for v in col if v is not None]
    if not vals:
        return None
    if fn == "avg_over_time":
        return sum(vals) / len(vals)
    if fn == "max_over_time":
        return max(vals)
    if fn == "min_over_time":
        return min(vals)
    if fn == "quantile_over_time":
        return quantile(q if q is not None else 0.5, vals)
    return None


def window_value(name: str, w: float, columns: Columns) -> float | None:
    """`value:` of a window-derived signal over the (clamped) window `w`."""
    st = columns.store
    if name in SINCE_START_VALUES:
        return counted_value(name, Window(st, w), columns.knob)
    if name == "engine_steps_per_s":
        return _steps_per_s(st, w)
    if name == "engine_busy":
        per_s, step_s = _steps_per_s(st, w), st.hist_mean("itl", w)
        return None if per_s is None or step_s is None else min(per_s * step_s, 1.0)
    if name == "queue_seen":
        seen = queue_seen(st, w, key("waiting"), key("queue_time"))
        return seen.ratio if seen else None
    if name == "decode_concurrency":
        tokens = st.rate("generation_tokens", w)
        itl = st.hist_mean("itl", w)
        return None if tokens is None or itl is None else tokens * itl
    if name == "demand_dispersion":
        vals = [v for v in columns.get(Operand("demand"), w) if v is not None]
        if len(vals) < 2:
            return None
        mean = sum(vals) / len(vals)
        var = sum((v - mean) ** 2 for v in vals) / len(vals)
        return ratio(var, mean)
    if name == "prompt_quiet":
        known = [v for v in columns.get(Operand("prompt_tokens"), w) if v is not None]
        steps = [b - a for a, b in itertools.pairwise(known)]
        return sum(1 for d in steps if d <= 0) / len(steps) if steps else None
    if name in ("wave_refills", "wave_share"):
        return waves(columns.get(Operand("demand"), w), name == "wave_share")
    if name in ("unreplaced_share", "unreplaced_drain"):
        demand = columns.get(Operand("demand"), w)
        finished = columns.get(Operand("requests_finished"), w)
        return unreplaced(st.times(w), demand, finished, name == "unreplaced_share")
    if name == "ttft_p95_imbalance":
        p95 = [q for k in st.series("ttft") if (q := st.hist_quantile(0.95, k, w)) is not None]
        return max(p95) / min(p95) if len(p95) >= 2 and min(p95) > 0 else None
    return None


def _seconds(st: Store, w: float) -> float:
    """The seconds the polls of `w` span (0 with fewer than two)."""
    times = st.times(w)
    return times[-1] - times[0] if len(times) >= 2 else 0.0


def _steps_per_s(st: Store, w: float) -> float | None:
    """Engine steps per second over `w`: observations of iteration_tokens."""
    delta = st.hist_delta("iteration_tokens", w)
    return ratio(delta.count if delta else None, _seconds(st, w))


def unreplaced(
    times: Sequence[float], demand: Column, finished: Column, share: bool
) -> float | None:
    """`unreplaced_share` (or `unreplaced_drain`): requests that finished with nothing new
    coming in for them (see `derived.DERIVED`). Requests in the server are conserved: what came
    in between two polls is the change of demand plus what finished. Each arrival replaces
    an answer of its own poll interval or of one at most `REPLACED_WITHIN_S` before it
    (oldest first); an answer no arrival took by then was held back. Counted per request,
    interval by interval: a client waiting for its batch sends the next wave the moment the
    last answer comes, so 2 s stretches (how this was counted before) held a fast wave's last
    finishes and the next wave's arrivals together and read half of a 5 s wave as replaced
    (the real server, one poll a second: OK on real waves). Failed polls are skipped.

    The drain is the most held back in one run of intervals with no arrival, over the batch's
    p95: a wave drains in one run, while independent arrivals at a low rate (a few long
    requests a minute) leave a finish or two unreplaced between arrivals, never most of the
    batch."""
    points = [
        (t, d, f)
        for t, d, f in zip(times, demand, finished, strict=True)
        if d is not None and f is not None
    ]
    if len(points) < 2:
        return None
    steps = list(itertools.pairwise(points))
    ends = [t1 for _, (t1, _, _) in steps]
    ended = [max(0.0, f1 - f0) for (_, _, f0), (_, _, f1) in steps]  # a reset is no finish
    came = [max(0.0, d1 - d0 + e) for ((_, d0, _), (_, d1, _)), e in zip(steps, ended, strict=True)]
    left = ended.copy()  # each interval's answers no arrival has taken yet
    lost = [0.0] * len(steps)  # what was left of them when their time was up
    first_open = 0
    for i, end in enumerate(ends):
        too_late = end - REPLACED_WITHIN_S - POLL_JITTER_S
        while ends[first_open] < too_late:
            lost[first_open] = left[first_open]
            first_open += 1
        arrivals = came[i]
        for j in range(first_open, i + 1):  # the oldest first
            taken = min(left[j], arrivals)
            left[j] -= taken
            arrivals -= taken
    # the window ended before these had their time: neither replaced nor held back
    done = sum(ended) - sum(left[first_open:])
    held_back = sum(lost)
    run = longest = 0.0
    for i in range(len(steps)):
        run += lost[i]
        longest = max(longest, run)
        if came[i] >= 0.5:  # the client sent again: this drain, if it was one, is over
            run = 0.0
    if share:
        return held_back / done if done > 0 else None
    peak = quantile(0.95, [d for _, d, _ in points])
    return longest / peak if peak else None


def waves(demand: Column, share: bool) -> float | None:
    """`wave_refills` (or `wave_share`): the climbs of demand that refill a drained server
    (see `derived.DERIVED`). A climb is a run of polls over which demand never falls (a
    wave's requests pass the API server over a second or two, so four polls a second see
    it rise in steps); polls that failed are skipped, not taken for a fall."""
    known = [v for v in demand if v is not None]
    peak = quantile(0.95, known)
    if peak is None or peak <= 0:
        return None
    gain_min, high = WAVE_GAIN * peak, WAVE_FROM * peak
    rises = refills = 0.0
    count = 0
    start = prev = known[0]
    candidate = counted = False  # this climb: a refill if the poll after it stays up
    for v in [*known[1:], -math.inf]:  # a last fall closes the last climb
        if candidate and v >= high:  # the wave stays up while its requests decode
            counted = True
            count += 1
        candidate = False
        if v < prev:
            gain = prev - start
            rises += gain
            refills += gain if counted else 0.0
            start, counted = v, False
        elif not counted and start <= high and v - start >= gain_min:
            candidate = True
        prev = v
    if not share:
        return float(count)
    return refills / rises if rises > 0 else None
