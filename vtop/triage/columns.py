"""Operands at every poll of a window: catalog signals and the per-poll derived signals.

Most measures are a function over such a column (`avg_over_time`, `share_over_time`), and
many rules read the same one, so a `Columns` builds each (operand, window) once per evaluation
and keeps it until the next. The derived signals (`demand`, `kv_tokens_per_seq`, `gauges_lie`,
...; `derived.DERIVED` says what each means) are computed here from the catalog's columns and
the knobs they scale by.

Every column lines up with the poll times of its window (`store.times(window)`): a column that
does not (a series that started mid-window) is all unknown, never shifted and never a crash.
Windows come in already clamped to the evaluation's usable history (`Snapshot.span`).
"""

from __future__ import annotations

from collections.abc import Mapping

from vtop import figures
from vtop.model import ALL, Knob
from vtop.signals.catalog import BY_NAME
from vtop.signals.store import Store, key
from vtop.triage.expr import Value
from vtop.triage.replicas import SIGNALS as REPLICA_SIGNALS
from vtop.triage.schema import Operand

Column = list[float | None]


class Columns:
    """One evaluation's columns, each built once."""

    def __init__(self, store: Store, knobs: Mapping[str, Knob]) -> None:
        self.store = store
        self.knobs = knobs
        self._cache: dict[tuple[Operand, float], Column] = {}

    def knob(self, name: str) -> Value:
        """A knob's value as expressions read it; None when unknown. Derived signals scale by
        knobs alone (`derived.Derived.knobs`), so the columns need no more of the snapshot."""
        knob = self.knobs.get(name)
        v = None if knob is None else knob.value
        return v if isinstance(v, (int, float, str, bool)) else None

    def get(self, operand: Operand, w: float) -> Column:
        """The operand at every poll of the (clamped) window `w`."""
        ck = (operand, w)
        col = self._cache.get(ck)
        if col is None:
            col = self._cache[ck] = self._build_column(operand, w)
        return col

    def _signal(self, name: str, label: str, w: float) -> Column:
        sig = BY_NAME[name]
        n = len(self.store.times(w))
        if sig.label == "gpu" and not label:
            return self.get(Operand("gpu_util_max"), w) if name == "gpu_util" else [None] * n
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
            return [
                None if r is None or q is None else float(r == 0 and q == 0)
                for r, q in zip(run, wait, strict=True)
            ]
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
            pool = figures.cap(self.knobs, "kv_capacity_tokens")
            if pool is None:
                return [None] * n
            cap = pool.value
            kv = self._signal("kv_usage", "", w)
            if name == "kv_used_tokens":
                return [None if u is None else u * cap for u in kv]
            run = self._signal("running", "", w)
            return [
                u * cap / r if u is not None and r and u > 0 else None
                for u, r in zip(kv, run, strict=True)
            ]
        if name == "batch_fill":
            seats = figures.cap(self.knobs)  # the batch cap, read as every view reads it
            if seats is None:
                return [None] * n
            return [None if r is None else r / seats.value for r in self._signal("running", "", w)]
        if name in ("kv_spread", "running_imbalance"):
            sig = "kv_usage" if name == "kv_spread" else "running"
            cols = [c for k in self.store.series(sig) if len(c := self.store.values(k, w)) == n]
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
