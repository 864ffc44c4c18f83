"""Counters and histograms over a window or since the server started, and when to trust the latter.

A counter or a histogram answers the same questions (`rate`, `increase`, `histogram_quantile`,
the window-derived values made of them alone) over two spans: a window of vtop's polls (the
delta between its ends, `Window`) or the server's whole life (its values at the latest poll,
`SinceStart`). One set of functions reads either, so a rule's `window: since_start` means
exactly what its windowed twin means, over a longer span.

A measure reads the server's own history with `window: since_start`: its counters and
histograms at the latest poll hold everything since it started, so a server that has queued
every request for an hour says so at vtop's first poll. That history is trusted only where it
describes the server as it is now (`trusted_history`): its start is known (the API server's
process_start_time_seconds), it has run for a minute at least, vtop saw no restart, and the
load has not fallen since (the token rate vtop sees is at least half the server's average
since its start). Rules read it only beside their windows, which still decide.
"""

from __future__ import annotations

from collections.abc import Callable

from vtop.model import ALL, Histogram, SeriesKey
from vtop.signals import histogram as hist
from vtop.signals.catalog import BY_NAME, Kind
from vtop.signals.store import Store, key
from vtop.triage.expr import Value
from vtop.triage.schema import Operand

SINCE_START_MIN_S = 60.0
"""A server younger than this has no history worth more than vtop's own window."""
SINCE_START_LOAD_FLOOR = 0.5
"""The server's history stands for now only while the token rate vtop sees is at least this
share of the server's average since its start (the load has not fallen away since)."""


class Window:
    """Counters and histograms over a window of polls (deltas between its ends)."""

    def __init__(self, store: Store, window_s: float) -> None:
        self.store = store
        self.window_s = window_s

    def increase(self, k: SeriesKey | str) -> float | None:
        return self.store.increase(k, self.window_s)

    def rate(self, k: SeriesKey | str) -> float | None:
        return self.store.rate(k, self.window_s)

    def hist(self, k: SeriesKey | str) -> Histogram | None:
        return self.store.hist_delta(k, self.window_s)


class SinceStart:
    """Counters and histograms since the server started: their values at the latest poll."""

    def __init__(self, store: Store, seconds: float) -> None:
        self.store = store
        self.seconds = seconds

    def increase(self, k: SeriesKey | str) -> float | None:
        return self.store.last(k)

    def rate(self, k: SeriesKey | str) -> float | None:
        total = self.store.last(k)
        return None if total is None else total / self.seconds

    def hist(self, k: SeriesKey | str) -> Histogram | None:
        return self.store.hist_last(k)


Counts = Window | SinceStart
"""Either span a counter or a histogram is read over."""


def trusted_history(
    store: Store, now: float | None, restarted: float | None, recent_s: float
) -> SinceStart | None:
    """The server's own history at `now`, where it stands for the server as it is now (module
    docstring); None where it does not. `recent_s`: the window vtop's own rate is read over."""
    start = store.last("api_start_time")
    if start is None or now is None or restarted is not None:
        return None
    seconds = now - start
    if seconds < SINCE_START_MIN_S:
        return None
    server = SinceStart(store, seconds)
    recent = Window(store, recent_s)
    for signal in ("generation_tokens", "requests_finished"):
        k = key(signal, ALL if BY_NAME[signal].label else "")
        average, current = server.rate(k), recent.rate(k)
        if average is not None and current is not None:
            return server if current >= SINCE_START_LOAD_FLOOR * average else None
    return None


def counted(
    fn: str, operand: Operand, q: float | None, counts: Counts, resolve: Callable[[str], Value]
) -> float | None:
    """A function of a counter or a histogram over a window or since the server started."""
    if fn == "value":
        return counted_value(operand.name, counts, resolve)
    sig = BY_NAME.get(operand.name)
    if sig is None:
        return None
    if sig.kind is Kind.HISTOGRAM:
        h = counts.hist(key(operand.name))
        if fn == "histogram_quantile":
            return hist.quantile(q or 0.5, h)
        return hist.mean(h) if fn == "histogram_mean" else None
    k = key(operand.name, operand.label or (ALL if sig.label else ""))
    if fn == "rate":
        return counts.rate(k)
    return counts.increase(k) if fn == "increase" else None


def ratio(num: float | None, den: float | None) -> float | None:
    """`num / den`; unknown where either is, or where `den` is not positive."""
    if num is None or den is None or den <= 0:
        return None
    return num / den


def counted_value(name: str, counts: Counts, resolve: Callable[[str], Value]) -> float | None:
    """A window-derived value made of counters and histograms alone (the names of
    `derived.SINCE_START_VALUES`), over a window or since the server started."""
    if name == "prefix_hit_rate":
        return ratio(counts.increase("prefix_cache_hits"), counts.increase("prefix_cache_queries"))
    if name in ("queue_share_of_ttft", "prefill_share_of_ttft"):
        # Means, not sums: queue and prefill times are recorded when a request finishes, TTFT
        # when its first token comes, so a window holds more of one than of the other. A part
        # of TTFT is at most all of it (a mean over other requests may say 149%).
        part = counts.hist("queue_time" if name.startswith("queue") else "prefill_time")
        share = ratio(hist.mean(part), hist.mean(counts.hist("ttft")))
        return None if share is None else min(share, 1.0)
    if name == "iteration_fill":
        mbt = resolve("max_num_batched_tokens")
        if isinstance(mbt, bool) or not isinstance(mbt, int | float):
            return None
        # A step holds at most its budget; vLLM counts a finishing prefill's first sampled
        # token beside the chunk, so a full step can read 101%.
        fill = ratio(hist.mean(counts.hist("iteration_tokens")), float(mbt))
        return None if fill is None else min(fill, 1.0)
    if name in ("prompt_len_spread", "ttft_spread"):
        h = counts.hist("prompt_len" if name.startswith("prompt") else "ttft")
        return ratio(hist.quantile(0.99, h), hist.quantile(0.5, h))
    if name == "preemptions_per_request":
        finished = counts.increase(key("requests_finished", ALL))
        preempted = counts.increase("preemptions")
        return ratio(preempted, None if finished is None else max(finished, 1.0))
    if name == "length_finish_share":
        return ratio(
            counts.increase(key("requests_finished", "length")),
            counts.increase(key("requests_finished", ALL)),
        )
    return None
