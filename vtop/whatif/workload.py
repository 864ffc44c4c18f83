"""The workload a server is under, estimated from what it exposes over a window.

The twin needs a `vtop.sim.workload` Workload: who sends (a closed loop of N clients or open-loop
arrivals at a rate) and how long requests are. A server shows neither directly, so:

- **Closed or open loop.** A queue that stays non-empty for most of the window without growing
  is the mark of clients that wait for their answers (a closed loop): open-loop arrivals above
  the service rate make the queue grow without bound, below it the queue keeps emptying. So:
  waiting > 0 in at least `CLOSED_BUSY_SHARE` of the polls and the last third's mean queue at
  most `GROWTH_FACTOR` times the first third's (plus `GROWTH_SLACK` requests) -> closed loop,
  with as many clients as were in the server on average (running + waiting). Clients that
  think between requests are invisible in the metrics, so think time is assumed 0: the twin's
  clients are those in the system. A queue that stays empty can hide a closed loop too: N
  clients in front of N or more seats keep exactly N requests in the server, and Poisson
  arrivals never do (the count of an open loop spreads like a Poisson count, variance about
  its mean). So a count in the server within `STEADY_SPREAD` of its highest (at least one
  request) in at least `STEADY_SHARE` of the polls (at least `STEADY_MIN` requests) is a closed
  loop of that many clients too (on a slow host one or two of 24 clients are often between
  requests, in the API server). Read as open arrivals at the finish rate, the twin would fill
  seats the clients cannot (16 clients in front of 24 seats measured no gain on the real
  server; the open loop predicted +9 %). Otherwise -> open-loop Poisson arrivals at the
  finished requests per second (in a steady state arrivals equal completions), plus the
  queue's growth.
- **Lengths.** The request_prompt_tokens / request_generation_tokens histograms' increases
  over the window. Their sums give the mean exactly; the spread comes from the buckets: the
  log-normal sigma whose bucket probabilities best explain the counts (a multinomial
  likelihood over a grid of sigmas, the mean held). Percentile interpolation inside the
  coarse 1-2-5 buckets would bias the spread; the likelihood uses every bucket.
- **max_tokens and finish reasons.** When nearly every request finishes "length" (a benchmark
  client with ignore_eos), the twin's requests generate exactly their sampled length; the
  request_params_max_tokens histogram's mean is the clients' max_tokens where exposed.
- **Prefix cache.** The hit ratio becomes each prompt's shared share.
- **One load at a time.** A window in which the load changed (40 clients, then 4) describes
  neither: past a load change (`vtop.signals.load`) the estimate (and the fit and the
  self-check, `vtop.whatif.predict.observe`) start there.

Every figure names where it came from: `read` (from the metrics) or `assumed`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from vtop.figures import ENDPOINT, Scope, by_label, prefix_hit_ratio
from vtop.model import ALL, Histogram
from vtop.signals.load import load_change
from vtop.signals.store import Store
from vtop.sim.scheduler import FINISH_LENGTH
from vtop.sim.workload import ClosedLoop, Lengths, Poisson, Shape, Workload

CLOSED_BUSY_SHARE = 0.5
"""Share of polls with a non-empty queue from which the load counts as a closed loop."""
GROWTH_FACTOR = 1.25
GROWTH_SLACK = 2.0
"""A queue whose last third averages above first-third x GROWTH_FACTOR + GROWTH_SLACK grows."""
LENGTH_SHARE = 0.9
"""Share of "length" finishes from which requests are taken to generate exactly their length."""
STEADY_SHARE = 0.9
STEADY_SPREAD = 0.1
STEADY_MIN = 2
"""A count in the server within `STEADY_SPREAD` of its highest (at least one request) in this
share of the polls, at least `STEADY_MIN` (one request in and out is any light load), is
clients that wait for answers."""
STEADY_POLLS = 10
"""Polls below which no count is steady: too few to tell."""
PREFIX_MIN = 0.05
"""A prefix-cache hit ratio below this is noise, not a shared prefix."""


DEFAULT_PROMPT = Lengths(600, 0.6, lo=16, hi=8000)
DEFAULT_OUTPUT = Lengths(250, 0.7, lo=8, hi=2048)
"""Chat-like lengths, used only when the server exposes no length histograms (and said so)."""

_SIGMAS = tuple(i / 50 for i in range(126))
"""The sigmas the length fit tries: 0 .. 2.5 in steps of 0.02."""


@dataclass(frozen=True, slots=True)
class WorkloadEstimate:
    """The workload a window of metrics implies, and what each part rests on."""

    workload: Workload
    loop: str
    """"closed" or "open"."""
    concurrency: float | None
    """Mean running + waiting over the window."""
    arrival_per_s: float | None
    prompt: Lengths
    output: Lengths
    max_tokens: int | None
    length_share: float | None
    """Share of finished requests that stopped at their max_tokens."""
    prefix_hit: float | None
    read: list[str] = field(default_factory=list)
    assumed: list[str] = field(default_factory=list)


def _norm_cdf(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def _bucket_counts(h: Histogram) -> list[tuple[float, float, float]]:
    """(lower, upper, count) per bucket, the +Inf one with an infinite upper bound."""
    out: list[tuple[float, float, float]] = []
    prev_bound, prev_cum = 0.0, 0.0
    for bound, cum in zip(h.bounds, h.buckets, strict=True):
        out.append((prev_bound, bound, max(0.0, cum - prev_cum)))
        prev_bound, prev_cum = bound, max(prev_cum, cum)
    out.append((prev_bound, math.inf, max(0.0, h.count - prev_cum)))
    return out


def fit_lengths(h: Histogram | None) -> Lengths | None:
    """A log-normal `Lengths` from a token-count histogram's observations; None when empty.

    The mean is the histogram's (sum / count); sigma maximises the likelihood of the bucket
    counts; lo and hi are the edges of the outermost non-empty buckets.
    """
    if h is None or not h.count > 0 or h.sum <= 0:
        return None
    mean = h.sum / h.count
    buckets = [b for b in _bucket_counts(h) if b[2] > 0]
    lo = max(1, math.floor(buckets[0][0]) + 1) if buckets[0][0] > 0 else 1
    top = buckets[-1][1]
    hi = round(top) if math.isfinite(top) else max(round(mean * 20), round(buckets[-1][0]) * 4)
    best_sigma, best_ll = 0.0, -math.inf
    for sigma in _SIGMAS:
        ll = 0.0
        if sigma == 0.0:
            inside = any(a < mean <= b for a, b, _ in buckets)
            ll = 0.0 if inside and len(buckets) == 1 else -math.inf
        else:
            mu = math.log(mean) - sigma * sigma / 2
            for a, b, n in buckets:
                pa = _norm_cdf((math.log(a) - mu) / sigma) if a > 0 else 0.0
                pb = _norm_cdf((math.log(b) - mu) / sigma) if math.isfinite(b) else 1.0
                ll += n * math.log(max(pb - pa, 1e-300))
        if ll > best_ll:
            best_sigma, best_ll = sigma, ll
    return Lengths(mean, best_sigma, lo=lo, hi=max(hi, lo))


def _queue_grows(waiting: list[float]) -> bool:
    third = len(waiting) // 3
    if third == 0:
        return False
    first = sum(waiting[:third]) / third
    last = sum(waiting[-third:]) / third
    return last > first * GROWTH_FACTOR + GROWTH_SLACK


def _steady_count(in_system: list[float]) -> bool:
    """Whether the count in the server held at its highest (see the module's docstring)."""
    if len(in_system) < STEADY_POLLS:
        return False
    top = max(in_system)
    near = sum(1 for n in in_system if n >= top - max(1.0, STEADY_SPREAD * top))
    return top >= STEADY_MIN and near >= STEADY_SHARE * len(in_system)


def steady_window(
    store: Store, window_s: float, scope: Scope = ENDPOINT
) -> tuple[float, str | None]:
    """The window's part after its largest load change (`vtop.signals.load`), and a line
    saying so; the whole window and None when the load held or the parts would be short."""
    change = load_change(store, window_s, scope.key("running"), scope.key("waiting"))
    if change is None:
        return window_s, None
    span = change.span_s
    return span, (
        f"load changed from {change.before:.1f} to {change.after:.1f} requests in the server "
        f"{span:.0f} s before the end: the last {span:.0f} s are the workload"
    )


def estimate(store: Store, window_s: float, scope: Scope = ENDPOINT) -> WorkloadEstimate:
    """The workload of `scope` over the last `window_s` seconds of `store`."""
    read: list[str] = []
    assumed: list[str] = []
    running = store.values(scope.key("running"), window_s)
    waiting = store.values(scope.key("waiting"), window_s)
    in_system = [
        r + w for r, w in zip(running, waiting, strict=True) if r is not None and w is not None
    ]
    queue = [w for w in waiting if w is not None]
    concurrency = sum(in_system) / len(in_system) if in_system else None
    finished = store.per_second(scope.key("requests_finished", ALL), window_s)
    if finished is None:  # a page without finish reasons
        finished = store.per_second(scope.key("requests_finished"), window_s)
    busy = sum(1 for w in queue if w > 0) / len(queue) if queue else 0.0
    grows = _queue_grows(queue)

    prompt = fit_lengths(store.hist_delta(scope.key("prompt_len"), window_s))
    if prompt is None:
        prompt = DEFAULT_PROMPT
        assumed.append(f"prompt lengths: chat-like (mean {prompt.mean:.0f}, no histogram)")
    else:
        read.append(f"prompt lengths: mean {prompt.mean:.0f}, sigma {prompt.sigma:.2f}")
    output = fit_lengths(store.hist_delta(scope.key("generation_len"), window_s))
    if output is None:
        output = DEFAULT_OUTPUT
        assumed.append(f"generation lengths: chat-like (mean {output.mean:.0f}, no histogram)")
    else:
        read.append(f"generation lengths: mean {output.mean:.0f}, sigma {output.sigma:.2f}")

    reasons = by_label(store, scope, "requests_finished", window_s)
    total = sum(r for r, _ in reasons)
    length_share = (
        sum(r for r, label in reasons if label == FINISH_LENGTH) / total if total else None
    )
    if length_share is None:
        assumed.append("finish reasons: unknown, requests stop on their own")
    else:
        read.append(f"finish reasons: {length_share:.0%} length")
    max_tokens_mean = store.hist_mean(scope.key("max_tokens_param"), window_s)
    max_tokens = round(max_tokens_mean) if max_tokens_mean else None
    if max_tokens is None:
        assumed.append("max_tokens: not exposed, none set")
    else:
        read.append(f"max_tokens: {max_tokens}")
    exact = length_share is not None and length_share >= LENGTH_SHARE
    if max_tokens is not None and not exact:
        output = Lengths(output.mean, output.sigma, output.lo, max(output.lo, max_tokens))

    hit = prefix_hit_ratio(store, scope, window_s)
    if hit is None:
        assumed.append("prefix-cache hits: unknown, none")
    else:
        read.append(f"prefix-cache hit ratio: {hit:.0%}")
    share = hit if hit is not None and hit >= PREFIX_MIN else 0.0
    shape = Shape(
        prompt,
        output,
        max_tokens=None if exact else max_tokens,
        finish=FINISH_LENGTH if exact else None,
        prefix_share=share,
    )

    workload: Workload
    arrival: float | None = None
    queued = busy >= CLOSED_BUSY_SHARE and not grows
    if concurrency is not None and (queued or _steady_count(in_system)):
        loop = "closed"
        clients = max(1, round(concurrency))
        workload = ClosedLoop(clients=clients, shapes=(shape,))
        why = (
            f"queue non-empty in {busy:.0%} of polls and steady"
            if queued
            else f"queue empty in {1 - busy:.0%} of polls, {max(in_system):.0f} requests in "
            "the server at nearly every poll"
        )
        read.append(f"closed loop: {why}; {concurrency:.1f} requests in the server")
        assumed.append("think time 0 (clients between requests are invisible)")
    else:
        loop = "open"
        growth = 0.0
        if grows and len(queue) >= 2:
            span = store.times(window_s)
            seconds = span[-1] - span[0] if len(span) >= 2 else 0.0
            growth = (queue[-1] - queue[0]) / seconds if seconds > 0 else 0.0
        arrival = (finished or 0.0) + max(0.0, growth)
        if finished is None:
            assumed.append("arrival rate: finished requests not exposed, 0")
        else:
            read.append(f"open loop at {arrival:.2f} requests/s (finished/s + queue growth)")
        assumed.append("Poisson arrivals (no bursts)")
        workload = Poisson(rate=arrival, shapes=(shape,))
    return WorkloadEstimate(
        workload=workload,
        loop=loop,
        concurrency=concurrency,
        arrival_per_s=arrival,
        prompt=prompt,
        output=output,
        max_tokens=max_tokens,
        length_share=length_share,
        prefix_hit=hit,
        read=read,
        assumed=assumed,
    )
