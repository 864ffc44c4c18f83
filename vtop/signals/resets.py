"""One rule for "a counter reset" and "the server restarted", for every reader of counters.

A Prometheus counter only goes up while the process that counts lives: a value below the
previous one means the process started again from zero (Prometheus's own rule for `rate()`),
and a histogram whose buckets stay the same but whose count went down did the same. The API
server's start time changing says it without any counter. Three readers ask, each for its own
purpose, and all ask here so that they cannot disagree about what a reset is:

- the store (`vtop.signals.store`) adjusts each counter and histogram series across its
  resets, and records a `restart` event when `restarted` says so;
- the live source (`vtop.sources.live`) re-reads the server's configuration when `restarted`
  says so, on the same counters: a restart is usually the user applying advice, and the knobs
  the next advice starts from must be the new ones;
- the report's window figures (`vtop.report.window`) adjust the counters and histograms they
  combine across resets (`counter_reset`, `histogram_change`) and count restarts from those
  counters alone. That is the one genuine difference: they see every poll of a window, light
  ones included, which carry only the figures' own signals (`LIGHT`), so the start time and
  the API server's CPU seconds are not there to read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Literal

from vtop.model import Histogram, SeriesKey

RESTART_COUNTERS = frozenset(
    {"generation_tokens", "prompt_tokens", "requests_finished", "preemptions", "api_cpu_seconds"}
)
"""Counters that every vLLM server moves and only a restart takes down."""
START_TIME = "api_start_time"
"""The API server's start time: a change is a restart even when no counter had moved yet."""
WATCHED = RESTART_COUNTERS | {START_TIME}
"""Every signal `restarted` reads: what a reader must remember of the previous poll."""

HistogramChange = Literal["reset", "rebucketed"]


def counter_reset(old: float | None, new: float) -> bool:
    """The counter went down since `old` (None or NaN: nothing to compare with)."""
    return old is not None and new < old


def histogram_change(old: Histogram | None, new: Histogram) -> HistogramChange | None:
    """`reset`: the same buckets with fewer observations (a restart); `rebucketed`: other
    buckets (a new configuration; nothing before compares with it); None: neither."""
    if old is None:
        return None
    if new.bounds != old.bounds:
        return "rebucketed"
    return "reset" if new.count < old.count else None


def restarted(
    scalars: Mapping[SeriesKey, float], previous: Callable[[SeriesKey], float | None]
) -> bool:
    """Whether the poll `scalars` shows a restart: a `RESTART_COUNTERS` series went down, or
    the start time changed. `previous(key)` is the series' value at the poll before (None,
    or NaN, when unknown)."""
    for k, v in scalars.items():
        signal = k.signal
        if signal in RESTART_COUNTERS:
            if counter_reset(previous(k), v):
                return True
        elif signal == START_TIME:
            old = previous(k)
            if old is not None and old == old and v != old:  # noqa: PLR0124 (NaN: unknown)
                return True
    return False
