"""The figures vtop shows of an endpoint: one catalog of what each is, one function per way
to read it.

Every view prints the same few figures: running against the batch cap, waiting, KV usage,
token, request and preemption rates, latency percentiles. Each is a `Figure` of `CATALOG`:
its name (the key of the report's JSON, the what-if's, the self-check's), the signal it reads
and how (`Read`), its unit, its names (the report's `label`, the what-if's and a reason's
`brief`, a screen panel's `title` and `short` name) and its two formatters (`screen`,
`report`). The dashboard's panels, fleet rows and engines table, `--once`, the report's text,
Markdown, HTML and JSON, the text quiz, `vtop whatif` and the twin's self-check read names,
labels, units and formatters from here, so a figure is called one thing wherever it is shown.
Computed in each view, they drifted (the fleet row read the cap only when it was an int, the
panels any number); here each is defined once, as plain values, and the views only print them.

"Now" is the latest poll for a gauge (`gauge`), a counter's per-second increase over the rate
span (`rate`; `rate_span`: 10 s, or three polls when polls are slower) and the percentiles of
the observations that arrived in the last `LATENCY_SPAN_S` (`latency`): the two "recent" spans,
each named once. Window figures are the same questions over the chosen window (`gauge_window`,
`counter_window`, `latency`); `window_figures` computes every one a whole-window consumer (the
twin's self-check, the what-if, the sweep) compares, on the observed store and the twin's
alike. The batch cap and the KV pool are read from the knobs by one parser (`cap`), which the
panels, the fleet rows and the rules' `batch_fill` share. Unknown is `None`, never 0.

The report's window figures (`vtop.report.window`) stream every poll of a window that may be
longer than any store holds, so they aggregate on their own, but they name the same figures
(`GAUGES`, `RATES`, `LATENCIES`) and read a histogram's increase the same way (`Latency`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from vtop import fmt
from vtop.model import ALL, Histogram, Knob, SeriesKey
from vtop.signals import histogram as hist
from vtop.signals.catalog import BY_NAME
from vtop.signals.store import Store

LATENCY_SPAN_S = 60.0
"""The span of "current" latency percentiles: the observations of the last minute."""
CAP_KNOB = "max_num_seqs"
"""The knob that caps the running batch."""

# -- the catalog ------------------------------------------------------------------------------

Read = Literal["gauge", "rate", "latency", "quantile", "mean", "knob"]
"""How a figure is read: a gauge (now its latest poll, over a window its mean), a counter's
increase per second, a histogram's observations (percentiles, mean, count), one percentile of
them, their mean (exact: the sum over the count), or a knob the server was started with."""
Unit = Literal["requests", "ratio", "1/s", "tokens/s", "requests/s", "seconds"]
"""A figure's unit, as the report's JSON writes it (`unit`) and its formatter reads it."""

SCREEN_UNITS: dict[Unit, str] = {
    "requests": "req",
    "ratio": "",
    "1/s": "/s",
    "tokens/s": "tok/s",
    "requests/s": "req/s",
    "seconds": "",
}
"""A unit as the screen writes it after a value (a share and a duration carry their own)."""


@dataclass(frozen=True, slots=True)
class Figure:
    """One figure of an endpoint: what it reads, its unit, its names, and how it is printed."""

    name: str
    """The name every layer keys it by: the report's JSON, the what-if's, the self-check's."""
    signal: str
    """The catalog signal it reads (`vtop.signals.catalog`), or the knob, for `read` "knob"."""
    read: Read
    unit: Unit
    label: str
    """The report's name (text, Markdown, HTML, the text quiz): `KV cache usage`."""
    brief: str
    """A what-if's table and a reason's name (the self-check, the advice, the goals):
    `KV usage`."""
    title: str
    """A screen panel's heading: `KV cache`."""
    short: str
    """The screen's short name (a panel's label, the engines table's heading): `KV cache`."""
    q: float | None = None
    """The quantile, for a percentile."""

    @property
    def screen_unit(self) -> str:
        return SCREEN_UNITS[self.unit]

    def screen(self, v: float | None) -> str:
        """The value as the screen and the what-if print it: `84.1%`, `1.23s`, `1.23k`."""
        if self.unit == "ratio":
            return fmt.pct(v)
        return fmt.seconds(v) if self.unit == "seconds" else fmt.num(v)

    def report(self, v: float | None) -> str:
        """The value as a report prints it, in its unit: `84.1%`, `1.23 s`, `1,234`."""
        return fmt.report_num(v, self.unit)

    def key(self, scope: Scope) -> SeriesKey:
        """The series it reads: every label value's sum for a labelled signal (finished
        requests by reason), the unlabelled series otherwise (a knob's is no series)."""
        signal = BY_NAME.get(self.signal)
        return scope.key(self.signal, ALL if signal is not None and signal.label else "")


def _percentile(name: str, of: Figure, q: float) -> Figure:
    """A latency's percentile, named by its brief name everywhere: `TTFT p90`."""
    said = f"{of.brief} p{q * 100:g}"
    return Figure(name, of.signal, "quantile", of.unit, said, said, said, said, q)


def _mean(name: str, of: Figure) -> Figure:
    """A latency's mean, exact where its percentiles are read off buckets: `ITL mean`."""
    said = f"{of.brief} mean"
    return Figure(name, of.signal, "mean", of.unit, said, said, said, said)


# name, signal, read, unit; the report's label, the what-if's, the panel's title, its short name
RUNNING = Figure(
    "running", "running", "gauge", "requests", "running", "running", "Running", "running"
)
WAITING = Figure(
    "waiting", "waiting", "gauge", "requests", "waiting", "waiting", "Waiting", "waiting"
)
KV_USAGE = Figure(
    "kv_usage", "kv_usage", "gauge", "ratio", "KV cache usage", "KV usage", "KV cache", "KV cache"
)
PREEMPTIONS = Figure(
    "preemptions_per_s",
    "preemptions",
    "rate",
    "1/s",
    "preemptions/s",
    "preemptions/s",
    "Preemptions",
    "preempt",
)
GENERATION = Figure(
    "generation_tokens_per_s",
    "generation_tokens",
    "rate",
    "tokens/s",
    "generation tokens/s",
    "gen tok/s",
    "Generation tokens",
    "gen",
)
PROMPT = Figure(
    "prompt_tokens_per_s",
    "prompt_tokens",
    "rate",
    "tokens/s",
    "prompt tokens/s",
    "prompt tok/s",
    "Prompt tokens",
    "prompt",
)
FINISHED = Figure(
    "requests_per_s",
    "requests_finished",
    "rate",
    "requests/s",
    "requests finished/s",
    "requests/s",
    "Finished requests",
    "done",
)
TTFT = Figure(
    "ttft",
    "ttft",
    "latency",
    "seconds",
    "time to first token",
    "TTFT",
    "Time to first token",
    "TTFT",
)
ITL = Figure(
    "itl", "itl", "latency", "seconds", "inter-token latency", "ITL", "Inter-token latency", "ITL"
)
E2E = Figure(
    "e2e", "e2e", "latency", "seconds", "end-to-end latency", "e2e", "End-to-end latency", "e2e"
)
QUEUE = Figure(
    "queue_time", "queue_time", "latency", "seconds", "queue time", "queue", "Queue time", "queue"
)
BATCH_CAP = Figure(
    "batch_cap", CAP_KNOB, "knob", "requests", "batch cap", "batch cap", "Batch cap", "cap"
)

QUEUE_P50 = _percentile("queue_p50", QUEUE, 0.5)
QUEUE_P90 = _percentile("queue_p90", QUEUE, 0.9)
TTFT_P50 = _percentile("ttft_p50", TTFT, 0.5)
TTFT_P90 = _percentile("ttft_p90", TTFT, 0.9)
TTFT_P99 = _percentile("ttft_p99", TTFT, 0.99)
ITL_P50 = _percentile("itl_p50", ITL, 0.5)
ITL_MEAN = _mean("itl_mean", ITL)
"""What the goals judge ITL by (`vtop.whatif.goals.ITL_GROWTH` says why)."""

CATALOG: tuple[Figure, ...] = (
    *(RUNNING, WAITING, KV_USAGE),
    *(PREEMPTIONS, GENERATION, PROMPT, FINISHED),
    *(TTFT, ITL, E2E, QUEUE),
    *(QUEUE_P50, QUEUE_P90, TTFT_P50, TTFT_P90, TTFT_P99, ITL_P50, ITL_MEAN),
    BATCH_CAP,
)
"""Every figure: the gauges, rates and latencies in the order the report lists them, then the
percentiles the what-if compares and the fleet row shows, and the batch cap."""
FIGURE = {f.name: f for f in CATALOG}
"""A figure by its name."""
GAUGES = tuple(f.name for f in CATALOG if f.read == "gauge")
"""The scheduler's gauges, by catalog name."""
RATES = {f.name: f.signal for f in CATALOG if f.read == "rate"}
"""Each per-second figure and the counter it is the rate of."""
LATENCIES = tuple(f.name for f in CATALOG if f.read == "latency")
"""The latency histograms a report summarises."""


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
    """The knob `name` (the batch cap unless told) as a positive number; None when unknown,
    not a number (a bool is not one) or not above 0 (no batch and no pool is 0 wide)."""
    knob = knobs.get(name)
    value = None if knob is None else knob.value
    if knob is None or not isinstance(value, int | float) or isinstance(value, bool):
        return None
    return Cap(float(value), knob) if value > 0 else None


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


def window_figures(
    store: Store, window_s: float | None, scope: Scope = ENDPOINT
) -> dict[str, float | None]:
    """Every single-valued figure of `CATALOG` over the window, as every view computes it: a
    gauge's mean over the window's polls, a counter's increase per second, a latency's
    percentile from its histogram's increase, a part never above its whole at the same
    quantile (`within_wholes`; TTFT's whole too, as the report's table); None where the server
    shows nothing. What a whole-window consumer compares: the twin's self-check reads the
    observed store and the twin's pages with it, the what-if's table and the sweep's rows."""
    out: dict[str, float | None] = {}
    seen: dict[str, Latency] = {}
    by_quantile: dict[float, dict[str, str]] = {}
    for f in CATALOG:
        if f.read == "gauge":
            out[f.name] = store.avg(f.key(scope), window_s)
        elif f.read == "rate":
            out[f.name] = store.per_second(f.key(scope), window_s)
        elif f.read in ("quantile", "mean"):
            lat = seen.get(f.signal)
            if lat is None:
                lat = seen[f.signal] = latency(store, f.key(scope), window_s)
            out[f.name] = lat.mean if f.q is None else lat.quantile(f.q)
            if f.q is not None:
                by_quantile.setdefault(f.q, {})[f.signal] = f.name
    for q, names in by_quantile.items():
        values = {signal: out[name] for signal, name in names.items()}
        for part, whole in WHOLES.items():  # a whole no figure prints (end-to-end) is read too
            if part in values and whole not in values:
                values[whole] = latency(store, scope.key(whole), window_s).quantile(q)
        held = within_wholes(values)
        out.update({name: held[signal] for signal, name in names.items()})
    return out
