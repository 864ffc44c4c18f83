"""The figures vtop shows of an endpoint, each computed from its store by one function.

The dashboard's panels, its fleet rows and engines table, `--once` and the report all print
the same few figures: running against the batch cap, waiting, KV usage, token and preemption
rates, latency percentiles. Computed in each view, they drifted (the fleet row read the cap
only when it was an int, the panels any number); here each is defined once, as plain values
(no Textual, no formatting), and the views only print them.

"Now" is the latest poll for a gauge (`gauge`), a counter's per-second increase over the rate
span (`rate`; `rate_span`: 10 s, or three polls when polls are slower) and the percentiles of
the observations that arrived in the last `LATENCY_SPAN_S` (`latency`). Window figures are the same
questions over the chosen window (`gauge_window`, `counter_window`, `latency`). Unknown is
`None`, never 0.

The report's window figures (`vtop.report.window`) stream every poll of a window that may be
longer than any store holds, so they aggregate on their own, but they name the same figures
(`GAUGES`, `RATES`) and read a histogram's increase the same way (`Latency`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from vtop.model import ALL, Histogram, Knob, SeriesKey
from vtop.signals import histogram as hist
from vtop.signals.store import Store

GAUGES = ("running", "waiting", "kv_usage")
"""The scheduler's gauges, by catalog name."""
RATES = {
    "preemptions_per_s": "preemptions",
    "generation_tokens_per_s": "generation_tokens",
    "prompt_tokens_per_s": "prompt_tokens",
    "requests_per_s": "requests_finished",
}
"""Each per-second figure and the counter it is the rate of."""

LATENCY_SPAN_S = 60.0
"""The span of "current" latency percentiles: the observations of the last minute."""
CAP_KNOB = "max_num_seqs"
"""The knob that caps the running batch."""


def rate_span(interval_s: float) -> float:
    """The span of a counter's "current" rate: 10 s (vLLM's own log line averages over the
    same span), or three polls when polls are slower. Shorter spans only add jitter, and every
    jitter is a repaint."""
    return max(10.0, 3.0 * interval_s)


DEFAULT_RATE_SPAN_S = rate_span(1.0)
"""The span of a "current" rate at vtop's default one-second polls, for a caller that does
not say its interval (a rate's span, not a latency's: that is `LATENCY_SPAN_S`)."""


@dataclass(frozen=True, slots=True)
class Scope:
    """Which series of an endpoint a figure reads: the aggregate (ALL) or one model/engine."""

    model: str = ALL
    engine: str = ALL

    def key(self, signal: str, label: str = "") -> SeriesKey:
        return SeriesKey(signal, self.model, self.engine, label)


ENDPOINT = Scope()
"""The endpoint as a whole: every model and engine combined."""


@dataclass(frozen=True, slots=True)
class Cap:
    """A numeric knob (the batch cap, the KV pool) and where it came from."""

    value: float
    knob: Knob


def cap(knobs: Mapping[str, Knob], name: str = CAP_KNOB) -> Cap | None:
    """The knob `name` as a number; None when unknown or not a number (a bool is not one)."""
    knob = knobs.get(name)
    if knob is None or not isinstance(knob.value, int | float) or isinstance(knob.value, bool):
        return None
    return Cap(float(knob.value), knob)


# -- now ---------------------------------------------------------------------------------------


def gauge(store: Store, k: SeriesKey) -> float | None:
    """A gauge now: its latest poll (None when the latest poll did not see it)."""
    return store.last(k)


def rate(store: Store, k: SeriesKey, span_s: float | None) -> float | None:
    """A counter's increase per second over the last `span_s` (no extrapolation)."""
    return store.per_second(k, span_s)


@dataclass(frozen=True, slots=True)
class Latency:
    """The observations a histogram gained over a span (its bucket increases), and what they
    say; each figure is computed when read, so a view pays only for the ones it prints."""

    delta: Histogram | None
    span_s: float | None = None
    """The seconds between the span's first and last poll, when known (for `per_s`)."""

    def quantile(self, q: float) -> float | None:
        return hist.quantile(q, self.delta)

    @property
    def p50(self) -> float | None:
        return hist.quantile(0.5, self.delta)

    @property
    def p90(self) -> float | None:
        return hist.quantile(0.9, self.delta)

    @property
    def p99(self) -> float | None:
        return hist.quantile(0.99, self.delta)

    @property
    def mean(self) -> float | None:
        return hist.mean(self.delta)

    @property
    def observations(self) -> float | None:
        return self.delta.count if self.delta is not None else None

    @property
    def per_s(self) -> float | None:
        d, span = self.delta, self.span_s
        return d.count / span if d is not None and span else None

    def stats(self) -> dict[str, float | None]:
        """Observations, mean and percentiles, as the report and `--once` write them."""
        return {
            "observations": self.observations,
            "mean": self.mean,
            "p50": self.p50,
            "p90": self.p90,
            "p99": self.p99,
        }


WHOLES: dict[str, str] = {"queue_time": "ttft", "prefill_time": "ttft", "ttft": "e2e"}
"""Each part of a request's latency and the whole it is part of: per request the part is no
longer, so no quantile of it is either. Each is read from its own histogram (other buckets,
and recorded at other moments: queue time when a request finishes, TTFT at its first token),
so a part's quantile can come out above its whole's; `within_wholes` holds it to it."""


def within_wholes(quantiles: Mapping[str, float | None]) -> dict[str, float | None]:
    """Same-quantile latencies (name -> value) with each part at most its whole, wholes first:
    queue p50 151 ms beside TTFT p50 124 ms reads 124 ms, the most it can be."""
    out = dict(quantiles)
    for part in ("ttft", "queue_time", "prefill_time"):
        whole = out.get(WHOLES[part])
        value = out.get(part)
        if value is not None and whole is not None and value > whole:
            out[part] = whole
    return out


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


def load_change(store: Store, window_s: float, scope: Scope = ENDPOINT) -> LoadChange | None:
    """The largest change of load in the last `window_s`: the point where the mean number of
    requests in the server (running + waiting) before and after differ most, if by
    `LOAD_CHANGE` times (each side + 1, so 0 against 0.5 is no change) with at least
    `MIN_STEADY_S` on either side; None when the load held. Forty clients, then four: a window
    across both describes neither, and what held under the first is not the second's."""
    times = store.times(window_s)
    running = store.values(scope.key("running"), window_s)
    waiting = store.values(scope.key("waiting"), window_s)
    seen = [
        (t, r + w)
        for t, r, w in zip(times, running, waiting, strict=True)
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


def latency(store: Store, k: SeriesKey, span_s: float | None) -> Latency:
    """The observations of histogram `k` over the last `span_s` (None: the whole history)."""
    return Latency(store.hist_delta(k, span_s))


@dataclass(frozen=True, slots=True)
class Now:
    """An endpoint's (or one engine's) figures at the latest poll: a fleet row's."""

    running: float | None
    waiting: float | None
    kv_usage: float | None
    preemptions_per_s: float | None
    generation_tokens_per_s: float | None
    ttft_p99: float | None


def now(
    store: Store,
    scope: Scope = ENDPOINT,
    *,
    rate_span_s: float,
    latency_span_s: float = LATENCY_SPAN_S,
) -> Now:
    """The figures of `scope` now (see the module's docstring for what "now" means)."""
    return Now(
        running=gauge(store, scope.key("running")),
        waiting=gauge(store, scope.key("waiting")),
        kv_usage=gauge(store, scope.key("kv_usage")),
        preemptions_per_s=rate(store, scope.key("preemptions"), rate_span_s),
        generation_tokens_per_s=rate(store, scope.key("generation_tokens"), rate_span_s),
        ttft_p99=latency(store, scope.key("ttft"), latency_span_s).p99,
    )


# -- over a window -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GaugeWindow:
    """A gauge's latest poll and its statistics over a window."""

    last: float | None
    avg: float | None
    min: float | None
    max: float | None


def gauge_window(store: Store, k: SeriesKey, window_s: float | None) -> GaugeWindow:
    return GaugeWindow(
        store.last(k), store.avg(k, window_s), store.min(k, window_s), store.max(k, window_s)
    )


@dataclass(frozen=True, slots=True)
class CounterWindow:
    """A counter's total (its latest reading) and its increase per second over a window."""

    total: float | None
    per_s: float | None


def counter_window(store: Store, k: SeriesKey, window_s: float | None) -> CounterWindow:
    return CounterWindow(store.last(k), store.per_second(k, window_s))


def latency_window(store: Store, k: SeriesKey, window_s: float | None) -> Latency:
    """`latency` with the span's length, for the rate of observations."""
    span = store.times(window_s)
    seconds = span[-1] - span[0] if len(span) >= 2 else None
    return Latency(store.hist_delta(k, window_s), seconds)


def busy_share(store: Store, k: SeriesKey, window_s: float | None) -> float | None:
    """The share of the window's polls at which gauge `k` was above zero (the queue
    non-empty); None when no poll saw it."""
    seen = [x for x in store.values(k, window_s) if x is not None]
    return sum(1 for x in seen if x > 0) / len(seen) if seen else None


def prefix_hit_ratio(store: Store, scope: Scope, window_s: float | None) -> float | None:
    """Prefix-cache hits per query over the window."""
    hits = store.per_second(scope.key("prefix_cache_hits"), window_s)
    queries = store.per_second(scope.key("prefix_cache_queries"), window_s)
    return hits / queries if hits is not None and queries else None


def by_label(
    store: Store, scope: Scope, signal: str, window_s: float | None
) -> list[tuple[float, str]]:
    """A counter's per-second increase per label value (finish reasons), largest first;
    labels that did not move are left out."""
    parts = []
    for label in store.labels(signal):
        r = store.per_second(scope.key(signal, label), window_s)
        if r:
            parts.append((r, label))
    parts.sort(reverse=True)
    return parts


@dataclass(frozen=True, slots=True)
class TtftSplit:
    """The mean time a request queued and the mean time its prefill took, over a window."""

    queue_s: float
    prefill_s: float

    @property
    def queue_share(self) -> float:
        return self.queue_s / (self.queue_s + self.prefill_s)


def ttft_split(store: Store, scope: Scope, window_s: float | None) -> TtftSplit | None:
    """Where time to first token went; None when either part is unknown or both are 0."""
    queue = latency(store, scope.key("queue_time"), window_s).mean
    prefill = latency(store, scope.key("prefill_time"), window_s).mean
    if queue is None or prefill is None or queue + prefill <= 0:
        return None
    return TtftSplit(queue, prefill)
