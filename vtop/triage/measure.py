"""One evaluation's view of a store: measures computed once and shared by all rules, and truth.

The catalog asks the same questions many times per evaluation (KV usage at the 90th
percentile over two minutes is read by four rules); a `Snapshot` answers each distinct
`Measure` once and keeps the answer until the next evaluation, and `holds` gives a condition's
three-valued truth from those answers. The measures themselves live beside it, one module per
kind: per-poll columns (`columns`), functions of one window (`windowed`), and counters and
histograms over a window or since the server started (`counts`, which also says when the
server's own history can be trusted). This module is the plumbing: the clock of the
evaluation, names, thresholds, the cache, and `share_over_time`.

Windows never reach back past a server restart (or past the first poll): after a restart the
configuration is usually the one the user just applied, and the old history is another server.
Unknown is `None` throughout: a series never seen, a window with no samples, a knob not known.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from vtop import knobs
from vtop.figures import WHOLES
from vtop.model import Knob
from vtop.signals.catalog import BY_NAME, Kind
from vtop.signals.store import Store
from vtop.triage.columns import Column, Columns
from vtop.triage.counts import SinceStart, Window, counted, trusted_history
from vtop.triage.derived import CONTEXT_WINDOW_S
from vtop.triage.expr import Expr, Value
from vtop.triage.replicas import PEER as REPLICA_PEER
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
from vtop.triage.windowed import over_time, window_value

_OPS: dict[str, Callable[[float, float], bool]] = {
    "above": operator.gt,
    "at_least": operator.ge,
    "below": operator.lt,
    "at_most": operator.le,
    "equals": operator.eq,
    "not_equals": operator.ne,
}


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

    def __init__(
        self,
        store: Store,
        knobs: Mapping[str, Knob],
        restarted: float | None,
        *,
        load_since: float | None = None,
    ) -> None:
        """`load_since`: judge only the load that began then (the engine's view after a load
        change): every window starts there at the earliest, and "since the server started"
        reads as since then, the server's older history being another load's."""
        if load_since is not None:
            restarted = load_since if restarted is None else max(restarted, load_since)
        self._new_load = load_since is not None
        self.store = store
        self.knobs = knobs
        times = store.times()
        self.now: float | None = times[-1] if times else None
        first = times[0] if times else None
        self.since = first if restarted is None or first is None else max(first, restarted)
        self._measures: dict[Measure, float | None] = {}
        self._columns = Columns(store, knobs)
        self._context: dict[str, Value] = {}
        self._thresholds: dict[Expr, float | None] = {}
        self._restarted = restarted
        self._server: SinceStart | bool | None = False  # False: not worked out yet

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

    def since_start_ok(self) -> SinceStart | None:
        """The server's own history, where it stands for the server as it is now
        (`counts.trusted_history`); None where it does not."""
        if self._server is False:
            recent_s = self.span(CONTEXT_WINDOW_S)
            self._server = trusted_history(self.store, self.now, self._restarted, recent_s)
        return self._server if isinstance(self._server, SinceStart) else None

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
                return knobs.KV_WALL * float(cap) / per
            return None
        return None

    # -- columns ---------------------------------------------------------------------------------

    def column(self, operand: Operand, window_s: float) -> Column:
        """The operand at every poll of the window (aligned with `store.times(window)`)."""
        return self._columns.get(operand, self.span(window_s))

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
        value = self._computed(m)
        part = m.operand
        if m.fn != "histogram_quantile" or part is None or value is None:
            return value
        whole = WHOLES.get(part.name)
        if whole is None:
            return value
        # A part of a request's latency is no longer than its whole at the same quantile
        # (`figures.within_wholes`): "TTFT p90 7.2 s, queue time p90 8.9 s" cannot be.
        of = self.measure(replace(m, operand=Operand(whole, part.label)))
        return value if of is None else min(value, of)

    def _computed(self, m: Measure) -> float | None:
        fn, operand = m.fn, m.operand
        if m.since_start and self._new_load:
            return self.measure(replace(m, window_s=1e12, since_start=False))
        if m.since_start:
            counts = self.since_start_ok()
            if counts is None or operand is None:
                return None
            return counted(fn, operand, m.q, counts, self.resolve)
        w = self.span(m.window_s)
        if fn == "share_over_time":
            return self._share(m.sub, m.window_s) if m.sub is not None else None
        if operand is None:
            return None
        if fn == "value":
            return window_value(operand.name, w, self._columns)
        sig = BY_NAME.get(operand.name)
        if sig is not None and sig.kind in (Kind.HISTOGRAM, Kind.COUNTER):
            return counted(fn, operand, m.q, Window(self.store, w), self.resolve)
        return over_time(fn, self.column(operand, m.window_s), m.q)

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
