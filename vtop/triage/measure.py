"""One evaluation's view of a store: windowed measures, computed once and shared by all rules.

The catalog asks the same questions many times per evaluation (KV usage at the 90th
percentile over two minutes is read by four rules); a `Snapshot` answers each distinct
`Measure` once and keeps the answer until the next evaluation. Columns of derived signals
(`demand`, `kv_tokens_per_seq`) are built once per window the same way.

Windows never reach back past a server restart (or past the first poll): after a restart the
configuration is usually the one the user just applied, and the old history is another server.
Unknown is `None` throughout: a series never seen, a window with no samples, a knob not known.

A measure may also read the server's own history (`window: since_start`): its counters and
histograms at the latest poll hold everything since it started, so a server that has queued
every request for an hour says so at vtop's first poll. That history is trusted only where it
describes the server as it is now (`Snapshot.since_start_ok`): its start is known (the API
server's process_start_time_seconds), it has run for a minute at least, vtop saw no restart,
and the load has not fallen since (the token rate vtop sees is at least half the server's
average since its start). Rules read it only beside their windows, which still decide.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Callable, Mapping, Sequence

from vtop.model import ALL, Histogram, Knob, SeriesKey
from vtop.signals import histogram as hist
from vtop.signals.catalog import BY_NAME, Kind
from vtop.signals.store import Store, key
from vtop.triage.derived import CONTEXT_WINDOW_S, SINCE_START_VALUES
from vtop.triage.expr import Expr, Value
from vtop.triage.replicas import PEER as REPLICA_PEER
from vtop.triage.replicas import SIGNALS as REPLICA_SIGNALS
from vtop.triage.schema import (
    All,
    AnyOf,
    Compare,
    Cond,
    IfKnown,
    KnobIs,
    Measure,
    Not,
    Operand,
    Sample,
)

Column = list[float | None]

WAVE_GAIN = 0.4
WAVE_FROM = 0.6
"""A climb of demand refills the server when it gains at least `WAVE_GAIN` of the peak (p95)
from no higher than `WAVE_FROM` of it: at one poll a second a wave of the batch's size is seen
from wherever the draining batch was at the last poll before it."""

SINCE_START_MIN_S = 60.0
"""A server younger than this has no history worth more than vtop's own window."""
SINCE_START_LOAD_FLOOR = 0.5
"""The server's history stands for now only while the token rate vtop sees is at least this
share of the server's average since its start (the load has not fallen away since)."""


class _Window:
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


class _SinceStart:
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


def quantile(q: float, values: Sequence[float]) -> float | None:
    """`quantile_over_time`: linear interpolation between order statistics (as the store)."""
    if not values:
        return None
    vs = sorted(values)
    pos = max(0.0, min(1.0, q)) * (len(vs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(vs) - 1)
    return vs[lo] + (vs[hi] - vs[lo]) * (pos - lo)


_OPS: dict[str, Callable[[float, float], bool]] = {
    "above": operator.gt, "at_least": operator.ge, "below": operator.lt,
    "at_most": operator.le, "equals": operator.eq, "not_equals": operator.ne,
}  # fmt: skip


def compare_column(column: Column, op: str, threshold: Value) -> list[bool | None]:
    """`compare` at every sample of a column: the operator is looked up once, not per sample
    (`share_over_time` compares every poll of its window on every evaluation)."""
    fn = _OPS.get(op)
    if fn is None or isinstance(threshold, bool) or not isinstance(threshold, int | float):
        return [compare(v, op, threshold) for v in column]
    return [None if v is None else fn(v, threshold) for v in column]


def compare(value: Value, op: str, threshold: Value) -> bool | None:
    """`value op threshold`, or None when either side is unknown or they do not compare."""
    if value is None or threshold is None:
        return None
    try:
        if op == "above":
            return bool(value > threshold)  # type: ignore[operator]
        if op == "at_least":
            return bool(value >= threshold)  # type: ignore[operator]
        if op == "below":
            return bool(value < threshold)  # type: ignore[operator]
        if op == "at_most":
            return bool(value <= threshold)  # type: ignore[operator]
        if op == "equals":
            return value == threshold
        return value != threshold
    except TypeError:
        return None


class Snapshot:
    """The store as one evaluation sees it; every answer cached for that evaluation."""

    def __init__(self, store: Store, knobs: Mapping[str, Knob], restarted: float | None) -> None:
        self.store = store
        self.knobs = knobs
        times = store.times()
        self.now: float | None = times[-1] if times else None
        first = times[0] if times else None
        self.since = first if restarted is None or first is None else max(first, restarted)
        self._measures: dict[Measure, float | None] = {}
        self._columns: dict[tuple[Operand, float], Column] = {}
        self._context: dict[str, Value] = {}
        self._thresholds: dict[Expr, float | None] = {}
        self._restarted = restarted
        self._server: _SinceStart | bool | None = False  # False: not worked out yet

    # -- time ----------------------------------------------------------------------------------

    @property
    def uptime_s(self) -> float:
        """Seconds of usable history (since the first poll or the last restart)."""
        if self.now is None or self.since is None:
            return 0.0
        return self.now - self.since

    def span(self, window_s: float) -> float:
        """The window, clamped so it never reaches back past a restart."""
        return min(window_s, self.uptime_s + 1e-6)

    def since_start_ok(self) -> _SinceStart | None:
        """The server's own history, where it stands for the server as it is now (module
        docstring); None where it does not."""
        if self._server is False:
            self._server = self._trusted_history()
        return self._server if isinstance(self._server, _SinceStart) else None

    def _trusted_history(self) -> _SinceStart | None:
        store = self.store
        start = store.last("api_start_time")
        if start is None or self.now is None or self._restarted is not None:
            return None
        seconds = self.now - start
        if seconds < SINCE_START_MIN_S:
            return None
        server = _SinceStart(store, seconds)
        recent = _Window(store, self.span(CONTEXT_WINDOW_S))
        for signal in ("generation_tokens", "requests_finished"):
            k = key(signal, ALL if BY_NAME[signal].label else "")
            average, now = server.rate(k), recent.rate(k)
            if average is not None and now is not None:
                return server if now >= SINCE_START_LOAD_FLOOR * average else None
        return None

    # -- names -----------------------------------------------------------------------------------

    def resolve(self, name: str) -> Value:
        """A knob's value or a context value; None when unknown."""
        knob = self.knobs.get(name)
        if knob is not None:
            v = knob.value
            return v if isinstance(v, (int, float, str, bool)) else None
        if name not in self._context:
            self._context[name] = self._compute_context(name)
        return self._context[name]

    def names(self, expr: Expr, extra: Mapping[str, Value] | None = None) -> dict[str, Value]:
        """The names `expr` reads, resolved (rule values in `extra` first)."""
        out: dict[str, Value] = {}
        for name in expr.names:
            out[name] = extra[name] if extra is not None and name in extra else self.resolve(name)
        return out

    def number(self, threshold: float | Expr | None) -> float | None:
        """A threshold's value this evaluation (expressions over knobs, cached)."""
        if threshold is None or isinstance(threshold, float | int):
            return threshold
        if threshold not in self._thresholds:
            self._thresholds[threshold] = threshold.number(self.names(threshold))
        return self._thresholds[threshold]

    def _compute_context(self, name: str) -> Value:
        w = CONTEXT_WINDOW_S
        if name == "uptime_s":
            return self.uptime_s
        if name == REPLICA_PEER:
            return self.store.context.get(name)
        if name == "demand_p95":
            return self.measure(Measure("quantile_over_time", Operand("demand"), w, 0.95))
        if name == "tokens_per_seq":
            return self.measure(Measure("quantile_over_time", Operand("kv_tokens_per_seq"), w, 0.9))
        if name == "kv_fit":
            cap = self.resolve("kv_capacity_tokens")
            per = self.resolve("tokens_per_seq")
            if isinstance(cap, int | float) and isinstance(per, float) and per > 0:
                return 0.9 * float(cap) / per
            return None
        return None

    # -- columns ---------------------------------------------------------------------------------

    def column(self, operand: Operand, window_s: float) -> Column:
        """The operand at every poll of the window (aligned with `store.times(window)`)."""
        w = self.span(window_s)
        ck = (operand, w)
        col = self._columns.get(ck)
        if col is None:
            col = self._columns[ck] = self._build_column(operand, w)
        return col

    def _signal(self, name: str, label: str, w: float) -> Column:
        sig = BY_NAME[name]
        n = len(self.store.times(w))
        if sig.label == "gpu" and not label:
            return self.column(Operand("gpu_util_max"), w) if name == "gpu_util" else [None] * n
        col = self.store.values(key(name, label or (ALL if sig.label else "")), w)
        return col if len(col) == n else [None] * n

    def _build_column(self, operand: Operand, w: float) -> Column:
        name = operand.name
        if name in BY_NAME:
            return self._signal(name, operand.label, w)
        n = len(self.store.times(w))
        col = self._derive(name, w, n)
        # A column that does not line up with the poll times is unusable, never a crash.
        return col if len(col) == n else [None] * n

    def _derive(self, name: str, w: float, n: int) -> Column:
        if name == "demand":
            run, wait = self._signal("running", "", w), self._signal("waiting", "", w)
            return [
                None if r is None or q is None else r + q for r, q in zip(run, wait, strict=True)
            ]
        if name == "idle":
            run, wait = self._signal("running", "", w), self._signal("waiting", "", w)
            return [None if r is None or q is None else float(r == 0 and q == 0)
                    for r, q in zip(run, wait, strict=True)]  # fmt: skip
        if name == "gauges_lie":
            run, wait = self._signal("running", "", w), self._signal("waiting", "", w)
            gen = self._signal("generation_tokens", "", w)
            out: Column = [None] * min(n, 1)  # the first poll has no poll before it
            pairs = zip(run[:-1], wait[:-1], run[1:], wait[1:], gen[:-1], gen[1:], strict=True)
            for r0, q0, r1, q1, g0, g1 in pairs:
                if r0 is None or q0 is None or r1 is None or q1 is None or g0 is None or g1 is None:
                    out.append(None)
                else:
                    out.append(float(r0 == q0 == r1 == q1 == 0 and g1 > g0))
            return out
        if name in ("kv_tokens_per_seq", "kv_used_tokens"):
            cap = self.resolve("kv_capacity_tokens")
            if not isinstance(cap, int | float) or isinstance(cap, bool):
                return [None] * n
            kv = self._signal("kv_usage", "", w)
            if name == "kv_used_tokens":
                return [None if u is None else u * cap for u in kv]
            run = self._signal("running", "", w)
            return [u * cap / r if u is not None and r and u > 0 else None
                    for u, r in zip(kv, run, strict=True)]  # fmt: skip
        if name == "batch_fill":
            cap = self.resolve("max_num_seqs")
            if not isinstance(cap, int | float) or isinstance(cap, bool) or cap <= 0:
                return [None] * n
            return [None if r is None else r / cap for r in self._signal("running", "", w)]
        if name in ("kv_spread", "running_imbalance"):
            sig = "kv_usage" if name == "kv_spread" else "running"
            cols = [c for k in self.store.series(sig)
                    if len(c := self.store.values(k, w)) == n]  # fmt: skip
            spread: Column = []
            for row in zip(*cols, strict=True) if len(cols) >= 2 else ():
                known = [v for v in row if v is not None]
                if len(known) < 2:
                    spread.append(None)
                elif name == "kv_spread":
                    spread.append(max(known) - min(known))
                else:
                    spread.append(max(known) / max(min(known), 1.0))
            return spread if spread else [None] * n
        if name in REPLICA_SIGNALS:  # written by the monitor (vtop.triage.replicas)
            return self.store.values(key(name), w)
        if name == "gpu_util_max":
            cols = [self.store.values(key("gpu_util", g), w) for g in self.store.labels("gpu_util")]
            out = [None] * n
            for col in cols:
                if len(col) != n:
                    continue
                out = [
                    a if b is None else b if a is None else max(a, b)
                    for a, b in zip(out, col, strict=True)
                ]
            return out
        return [None] * n

    # -- measures --------------------------------------------------------------------------------

    def measure(self, m: Measure) -> float | None:
        """The value of one measure, computed once per evaluation."""
        if m in self._measures:
            return self._measures[m]
        value = self._compute(m)
        if value is not None and not math.isfinite(value):
            value = None
        self._measures[m] = value
        return value

    def _compute(self, m: Measure) -> float | None:
        fn, operand = m.fn, m.operand
        if m.since_start:
            counts = self.since_start_ok()
            if counts is None or operand is None:
                return None
            return self._counted(fn, operand, m.q, counts)
        w = self.span(m.window_s)
        if fn == "share_over_time":
            return self._share(m.sub, m.window_s) if m.sub is not None else None
        if operand is None:
            return None
        if fn == "value":
            return self._window_value(operand.name, w)
        sig = BY_NAME.get(operand.name)
        if sig is not None and sig.kind in (Kind.HISTOGRAM, Kind.COUNTER):
            return self._counted(fn, operand, m.q, _Window(self.store, w))
        col = self.column(operand, m.window_s)
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
            return quantile(m.q if m.q is not None else 0.5, vals)
        return None

    def _counted(self, fn: str, operand: Operand, q: float | None,
                 counts: _Window | _SinceStart) -> float | None:  # fmt: skip
        """A function of a counter or a histogram over a window or since the server started."""
        if fn == "value":
            return self._counted_value(operand.name, counts)
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

    def _ratio(self, num: float | None, den: float | None) -> float | None:
        if num is None or den is None or den <= 0:
            return None
        return num / den

    def _counted_value(self, name: str, counts: _Window | _SinceStart) -> float | None:
        """A window-derived value made of counters and histograms alone (the names of
        `derived.SINCE_START_VALUES`), over a window or since the server started."""
        if name == "prefix_hit_rate":
            return self._ratio(counts.increase("prefix_cache_hits"),
                               counts.increase("prefix_cache_queries"))  # fmt: skip
        if name in ("queue_share_of_ttft", "prefill_share_of_ttft"):
            part = counts.hist("queue_time" if name.startswith("queue") else "prefill_time")
            ttft = counts.hist("ttft")
            return self._ratio(part.sum if part else None, ttft.sum if ttft else None)
        if name == "iteration_fill":
            mbt = self.resolve("max_num_batched_tokens")
            if isinstance(mbt, bool) or not isinstance(mbt, int | float):
                return None
            return self._ratio(hist.mean(counts.hist("iteration_tokens")), float(mbt))
        if name in ("prompt_len_spread", "ttft_spread"):
            h = counts.hist("prompt_len" if name.startswith("prompt") else "ttft")
            return self._ratio(hist.quantile(0.99, h), hist.quantile(0.5, h))
        if name == "length_finish_share":
            return self._ratio(counts.increase(key("requests_finished", "length")),
                               counts.increase(key("requests_finished", ALL)))  # fmt: skip
        return None

    def _window_value(self, name: str, w: float) -> float | None:
        st = self.store
        if name in SINCE_START_VALUES:
            return self._counted_value(name, _Window(st, w))
        if name == "engine_steps_per_s":
            delta = st.hist_delta("iteration_tokens", w)
            times = st.times(w)
            seconds = times[-1] - times[0] if len(times) >= 2 else 0.0
            return self._ratio(delta.count if delta else None, seconds)
        if name == "decode_concurrency":
            tokens = st.rate("generation_tokens", w)
            itl = st.hist_mean("itl", w)
            return None if tokens is None or itl is None else tokens * itl
        if name == "demand_dispersion":
            vals = [v for v in self.column(Operand("demand"), w) if v is not None]
            if len(vals) < 2:
                return None
            mean = sum(vals) / len(vals)
            var = sum((v - mean) ** 2 for v in vals) / len(vals)
            return self._ratio(var, mean)
        if name == "prompt_quiet":
            known = [v for v in self.column(Operand("prompt_tokens"), w) if v is not None]
            steps = [b - a for a, b in itertools.pairwise(known)]
            return sum(1 for d in steps if d <= 0) / len(steps) if steps else None
        if name in ("wave_refills", "wave_share"):
            return self._waves(w, name == "wave_share")
        if name == "ttft_p95_imbalance":
            p95 = [q for k in st.series("ttft") if (q := st.hist_quantile(0.95, k, w)) is not None]
            return max(p95) / min(p95) if len(p95) >= 2 and min(p95) > 0 else None
        return None

    def _waves(self, w: float, share: bool) -> float | None:
        """`wave_refills` (or `wave_share`): the climbs of demand that refill a drained server
        (see `derived.DERIVED`). A climb is a run of polls over which demand never falls (a
        wave's requests pass the API server over a second or two, so four polls a second see
        it rise in steps); polls that failed are skipped, not taken for a fall."""
        known = [v for v in self.column(Operand("demand"), w) if v is not None]
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

    # -- share_over_time ---------------------------------------------------------------------

    def _share(self, sub: Cond, window_s: float) -> float | None:
        n = len(self.store.times(self.span(window_s)))
        truth = self._samples(sub, window_s, n)
        known = [t for t in truth if t is not None]
        return sum(known) / len(known) if known else None

    def _samples(self, cond: Cond, window_s: float, n: int) -> list[bool | None]:
        if isinstance(cond, Sample):
            col = self.column(cond.operand, window_s)
            thr = self.number(cond.threshold)
            return compare_column(col, cond.op, thr) if len(col) == n else [None] * n
        if isinstance(cond, Not):
            return [None if t is None else not t for t in self._samples(cond.item, window_s, n)]
        if isinstance(cond, IfKnown):
            return [t is not False for t in self._samples(cond.item, window_s, n)]
        if isinstance(cond, All | AnyOf):
            parts = [self._samples(c, window_s, n) for c in cond.items]
            join = _all if isinstance(cond, All) else _any
            return [join(row) for row in zip(*parts, strict=True)]
        if isinstance(cond, KnobIs):
            return [self.knob_is(cond)] * n
        if isinstance(cond, Compare):
            return [None] * n
        return [None] * n

    def knob_is(self, cond: KnobIs) -> bool | None:
        knob = self.knobs.get(cond.knob)
        return None if knob is None else compare(knob.value, cond.op, cond.value)


def _all(values: Sequence[bool | None]) -> bool | None:
    # `in` on values that are only True, False or None: no 0 or 1 to be taken for them.
    if False in values:
        return False
    return None if None in values else True


def _any(values: Sequence[bool | None]) -> bool | None:
    if True in values:
        return True
    return None if None in values else False


def holds(cond: Cond, snap: Snapshot, active: bool) -> bool | None:
    """Three-valued truth of a condition; `active` switches comparisons to their clear level."""
    if isinstance(cond, Compare):
        value = snap.measure(cond.measure)
        if active and cond.clear is not None:
            clear = snap.number(cond.clear)
            # Hysteresis: once active, `above X` holds until the value falls below the clear
            # level, and `below X` until it rises above it.
            op = "at_least" if cond.op in ("above", "at_least") else "at_most"
            return compare(value, op, clear)
        return compare(value, cond.op, snap.number(cond.threshold))
    if isinstance(cond, KnobIs):
        return snap.knob_is(cond)
    if isinstance(cond, Not):
        inner = holds(cond.item, snap, active)
        return None if inner is None else not inner
    if isinstance(cond, IfKnown):
        return holds(cond.item, snap, active) is not False
    if isinstance(cond, All | AnyOf):
        # Three-valued and/or that stops at the first deciding item (False for all, True
        # for any): the same truth as `_all`/`_any` over every item, without computing the
        # measures of the items after it (most rules fail their first condition).
        decides = isinstance(cond, AnyOf)
        unknown = False
        for c in cond.items:
            truth = holds(c, snap, active)
            if truth is decides:
                return decides
            unknown = unknown or truth is None
        return None if unknown else not decides
    return None
