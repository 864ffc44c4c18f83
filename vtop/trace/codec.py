"""One poll <-> one record body: a series dictionary in the stream, lanes of integer deltas.

Every number a `Frame` holds becomes a *series* with a small integer id, defined in-stream the
first time it appears (`DEF`: its path, its exponent, its lane and its absolute value) and
redefined only when it must change shape. Each poll then stores, per series, the change since
the previous poll as a fixed-point integer:

- counters, gauges and histogram *bins* (not cumulative buckets: one observation changes one
  bin but every bucket above it) are integers and are stored exactly;
- other floats are stored as `q = round(v × 10^e)`, the smallest `e` that represents the value
  exactly, up to a per-series maximum (`MAX_EXP_FOR`); past it the error of every sample is at
  most `0.5 × 10^-e` (e.g. 0.5 µs for seconds) and never accumulates, because what is
  quantised is the value, not the delta;
- the deltas of a poll are written as dense little-endian arrays, one per *lane* (int8, int16,
  int32, int64); a series moves to a wider lane the first time a delta does not fit (`MOVE`).

Dense lanes cost a byte per unchanged int8 slot, which deflate (shared across polls) squeezes to
almost nothing; in exchange the reader decodes a poll with one `array()` and one `map(add)` per
lane, which is what lets a report read 86 400 polls in seconds. Absent series (a failed poll, a
GPU field the card lacks) are tracked with presence toggles and are `None`/missing on replay,
never 0. What is not a number (errors, info labels, the GPU names, knobs and events) travels as
small JSON objects: `META` when it changed, `EXTRA` for what belongs to one poll only.

The decoder trusts nothing: every count is checked against the limits in `wire` before it
allocates; the JSON parts (metadata, extras, series paths) are checked by `metadata`, which cuts
every string and strips it of control characters before anything can print it.
"""

from __future__ import annotations

import json
import math
import sys
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import accumulate
from operator import add
from typing import Any, Final, cast

from vtop.model import (
    EndpointInfo,
    Event,
    Frame,
    GpuReading,
    GpuStatus,
    Histogram,
    HostReading,
    Knob,
    KnobValue,
    Scrape,
    SeriesKey,
)
from vtop.trace import wire
from vtop.trace.metadata import (
    GPU_FLOAT,
    GPU_INT,
    HOST_FLOAT,
    HOST_INT,
    GpuMeta,
    Meta,
    Path,
    ScrapeMeta,
    parse_event,
    parse_json,
    parse_knobs,
    parse_meta,
    parse_path,
    parse_servers,
)
from vtop.trace.wire import Cursor, Damaged, put_str, put_svarint, put_uvarint

SCALAR: Final = 0
HIST: Final = 1
LANE_CODES: Final = ("b", "h", "i", "q")
LANE_BYTES: Final = (1, 2, 4, 8)
LANE_LIMIT: Final = (1 << 7, 1 << 15, 1 << 31, 1 << 63)
BIG_ENDIAN: Final = sys.byteorder == "big"
Q_LIMIT: Final = float(1 << 62)
MAX_PENDING: Final = 64
"""Polls of deltas a decoder holds before adding them all in. Slots that frames read are
*watched* and kept current poll by poll; the rest wait in the pending arrays and are added in
one C-level `sum` per slot when a full frame (or the limit) needs them. A report that reads a
dozen values per poll of a day-long trace so skips adding the other few hundred each poll."""

OP_END, OP_META, OP_EXTRA, OP_DEF, OP_MOVE, OP_TOGGLE = range(6)


def max_exp_for(path: Path) -> int:
    """The most decimal places kept for a series; beyond, samples are rounded (bounded error)."""
    kind = path[0]
    if kind in ("s", "hs", "l"):
        return 6
    if kind == "b":
        return 0
    return 3


def quantize(v: float, e: int) -> int:
    return round(v * 10.0**e) if e >= 0 else round(v / 10.0**-e)


def fit_exp(values: Iterable[float], lo: int, hi: int) -> int:
    """Smallest exponent in [lo, hi] that stores every value exactly (else the largest that
    keeps |q| < 2^62)."""
    vals = list(values)
    big = max((abs(v) for v in vals), default=0.0)
    while hi > -wire.MAX_EXP and big * 10.0**hi >= Q_LIMIT:
        hi -= 1
    for e in range(min(lo, hi), hi + 1):
        div = 10.0**e
        if all(quantize(v, e) / div == v for v in vals):
            return e
    return hi


def _finite(v: float | None) -> bool:
    return v is not None and math.isfinite(v)


# -- encoding ---------------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class _EncSeries:
    path: Path
    sid: int
    kind: int
    lane: int
    exp: int
    top: int
    bounds: tuple[float, ...]
    last: list[int]


@dataclass(slots=True)
class Encoded:
    body: bytes
    samples: int


class Encoder:
    """Turns frames into record bodies. `reset()` starts a keyframe: a self-contained body."""

    def __init__(self) -> None:
        self._hints: dict[Path, tuple[int, int]] = {}
        self._paths: dict[tuple[str, SeriesKey], tuple[Path, Path, Path]] = {}
        self._knobs: dict[str, dict[str, list[KnobValue]]] = {}
        self._server: dict[str, list[Any]] = {}
        self.reset()

    def reset(self) -> None:
        self._series: dict[Path, _EncSeries] = {}
        self._lanes: list[list[_EncSeries]] = [[], [], [], []]
        self._present: set[int] = set()
        self._meta = ""
        self._t_us = 0
        self._next_sid = 0
        self._keyframe = True
        if len(self._hints) > wire.MAX_SERIES:
            self._hints.clear()
        if len(self._paths) > wire.MAX_SERIES:
            self._paths.clear()

    def encode(self, frame: Frame) -> Encoded:
        out = bytearray()
        t_us = round(frame.t * 1e6)
        put_svarint(out, t_us - self._t_us)
        self._t_us = t_us
        meta = json.dumps(_meta_of(frame), separators=(",", ":"), ensure_ascii=False)
        if meta != self._meta:
            self._meta = meta
            out.append(OP_META)
            put_str(out, meta)
        extra = self._extra_of(frame)
        if extra:
            out.append(OP_EXTRA)
            put_str(out, json.dumps(extra, separators=(",", ":"), ensure_ascii=False))
        self._keyframe = False
        deltas: dict[int, list[int]] = {}
        present: set[int] = set()
        samples = 0
        for path, kind, values, bounds in self._values_of(frame):
            s = self._series.get(path)
            if s is None or s.bounds != bounds:
                exp, lane = self._hints.get(path, (0, 0))
                e = fit_exp(values, exp, max_exp_for(path))
                s = self._define(out, path, kind, values, bounds, e, lane)
            else:
                e = s.exp
                if kind == SCALAR:
                    v = values[0]
                    q = [round(v) if e == 0 else quantize(v, e)]
                    refit = (e < s.top and q[0] / 10.0**e != v) or abs(v) * 10.0**e >= Q_LIMIT
                else:
                    q = _quantize_all(kind, values, e)
                    refit = (e < s.top and not _exact(kind, q, values, e)) or (
                        abs(values[-1]) * 10.0**e >= Q_LIMIT
                    )
                if refit:
                    e = fit_exp(values, e, s.top)
                    if e != s.exp:
                        s = self._define(out, path, kind, values, bounds, e, s.lane)
                        q = s.last
                if q is not s.last:
                    d = list(map(int.__sub__, q, s.last))
                    s.last = q
                    if any(d):
                        deltas[s.sid] = d
                        lim = LANE_LIMIT[s.lane]
                        if max(d) >= lim or min(d) < -lim:
                            self._move(out, s, d)
            present.add(s.sid)
            samples += len(s.last) + (1 if kind == HIST else 0)
        toggles = sorted(present ^ self._present)
        if toggles:
            out.append(OP_TOGGLE)
            put_uvarint(out, len(toggles))
            prev = 0
            for sid in toggles:
                put_uvarint(out, sid - prev)
                prev = sid
            self._present = present
        out.append(OP_END)
        for scrape in frame.scrapes:
            put_svarint(out, round(scrape.t * 1e6) - t_us)
        for lane_no, members in enumerate(self._lanes):
            if not members:
                continue
            flat: list[int] = []
            for member in members:
                change = deltas.get(member.sid)
                flat.extend(change if change is not None else [0] * len(member.last))
            arr = array(LANE_CODES[lane_no], flat)
            if BIG_ENDIAN:
                arr.byteswap()
            out += arr.tobytes()
        return Encoded(bytes(out), samples)

    def _define(
        self,
        out: bytearray,
        path: Path,
        kind: int,
        values: list[float],
        bounds: tuple[float, ...],
        exp: int,
        lane: int,
    ) -> _EncSeries:
        old = self._series.get(path)
        if old is not None:
            self._lanes[old.lane].remove(old)
            sid = old.sid
        else:
            sid = self._next_sid
            self._next_sid += 1
        q = _quantize_all(kind, values, exp)
        s = _EncSeries(path, sid, kind, lane, exp, max_exp_for(path), bounds, q)
        self._series[path] = s
        self._lanes[lane].append(s)
        self._hints[path] = (exp, lane)
        out.append(OP_DEF)
        put_uvarint(out, sid)
        put_str(out, json.dumps(path, separators=(",", ":"), ensure_ascii=False))
        out.append(kind)
        out.append(lane)
        put_svarint(out, exp)
        if kind == HIST:
            put_uvarint(out, len(bounds))
            out += array("d", bounds).tobytes() if not BIG_ENDIAN else _le_doubles(bounds)
        for value in s.last:
            put_svarint(out, value)
        return s

    def _move(self, out: bytearray, s: _EncSeries, d: list[int]) -> None:
        worst = max(*d, -min(d) - 1)
        lane = next(i for i, lim in enumerate(LANE_LIMIT) if worst < lim)
        self._lanes[s.lane].remove(s)
        s.lane = lane
        self._lanes[lane].append(s)
        self._hints[s.path] = (s.exp, lane)
        out.append(OP_MOVE)
        put_uvarint(out, s.sid)
        out.append(lane)

    def _values_of(
        self, frame: Frame
    ) -> Iterable[tuple[Path, int, list[float], tuple[float, ...]]]:
        for scrape in frame.scrapes:
            ep = scrape.endpoint
            if _finite(scrape.latency_s):
                yield ("l", ep), SCALAR, [cast(float, scrape.latency_s)], ()
            if scrape.size_bytes is not None:
                yield ("b", ep), SCALAR, [float(scrape.size_bytes)], ()
            paths = self._paths
            for k, v in scrape.scalars.items():
                if math.isfinite(v):
                    p = paths.get((ep, k)) or self._path(ep, k)
                    yield p[0], SCALAR, [v], ()
            for k, h in scrape.histograms.items():
                cum = [*h.buckets, h.count]
                if len(h.bounds) != len(h.buckets) or not all(map(math.isfinite, cum)):
                    continue
                p = paths.get((ep, k)) or self._path(ep, k)
                yield p[1], HIST, cum, h.bounds
                if math.isfinite(h.sum):
                    yield p[2], SCALAR, [h.sum], ()
        for g in frame.gpu.gpus:
            for name in (*GPU_FLOAT, *GPU_INT):
                v = getattr(g, name)
                if v is not None and math.isfinite(v):
                    yield ("g", g.index, name), SCALAR, [float(v)], ()
        if frame.host is not None:
            for name in (*HOST_FLOAT, *HOST_INT):
                v = getattr(frame.host, name)
                if v is not None and math.isfinite(v):
                    yield ("o", name), SCALAR, [float(v)], ()

    def _path(self, ep: str, k: SeriesKey) -> tuple[Path, Path, Path]:
        tail = (ep, k.signal, k.model, k.engine, k.label)
        p = (("s", *tail), ("h", *tail), ("hs", *tail))
        self._paths[(ep, k)] = p
        return p

    def _extra_of(self, frame: Frame) -> dict[str, Any]:
        extra: dict[str, Any] = {}
        for scrape in frame.scrapes:
            if scrape.knobs is not None:
                knobs = {n: [k.value, k.provenance, k.detail] for n, k in scrape.knobs.items()}
                extra.setdefault("knobs", {})[scrape.endpoint] = knobs
                self._knobs[scrape.endpoint] = knobs
            if scrape.server is not None:
                srv = scrape.server
                server = [srv.version, list(srv.models), srv.max_model_len]
                extra.setdefault("server", {})[scrape.endpoint] = server
                self._server[scrape.endpoint] = server
        if frame.events:
            extra["events"] = [[e.t, e.kind, e.endpoint, e.message] for e in frame.events]
        if self._keyframe and (self._knobs or self._server):
            extra["carry"] = {"knobs": self._knobs, "server": self._server}
        return extra


def _le_doubles(values: tuple[float, ...]) -> bytes:
    arr = array("d", values)
    arr.byteswap()
    return arr.tobytes()


def _quantize_all(kind: int, values: list[float], exp: int) -> list[int]:
    q = [round(v) for v in values] if exp == 0 else [quantize(v, exp) for v in values]
    if kind == HIST:
        return [q[0], *map(int.__sub__, q[1:], q[:-1])] if q else q
    return q


def _exact(kind: int, q: list[int], values: list[float], exp: int) -> bool:
    div = 10.0**exp
    cum: Iterable[int] = accumulate(q) if kind == HIST else q
    return all(a / div == v for a, v in zip(cum, values, strict=True))


def _meta_of(frame: Frame) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "scrapes": [[s.endpoint, s.error, s.has_vllm_series, dict(s.info)] for s in frame.scrapes]
    }
    gpu = frame.gpu
    meta["gpu"] = [gpu.unavailable, [[g.index, g.name, g.uuid, g.error] for g in gpu.gpus]]
    meta["host"] = frame.host is not None
    return meta


# -- decoding ---------------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class _DecSeries:
    sid: int
    path: Path
    kind: int
    lane: int
    div: float
    bounds: tuple[float, ...]
    n: int
    start: int = 0


Ref = tuple[int, int, float]
"""lane, index in the lane, divisor."""


@dataclass(slots=True)
class _ScrapePlan:
    meta: ScrapeMeta
    latency: Ref | None = None
    size: Ref | None = None
    scalars: list[tuple[SeriesKey, int, int, float]] = field(default_factory=list)
    hists: list[tuple[SeriesKey, tuple[float, ...], Ref, int, Ref | None]] = field(
        default_factory=list
    )


@dataclass(slots=True)
class _Plan:
    scrapes: list[_ScrapePlan]
    gpus: list[tuple[GpuMeta, list[tuple[str, Ref, bool]]]]
    host: list[tuple[str, Ref, bool]] | None


class Decoder:
    """Applies record bodies in order; `frame()` materialises the current poll."""

    def __init__(self) -> None:
        self.knobs: dict[str, dict[str, Knob]] = {}
        """Latest knobs per endpoint seen so far (carried across keyframes)."""
        self.server: dict[str, EndpointInfo] = {}
        self.reset()

    def reset(self) -> None:
        self.series: dict[int, _DecSeries] = {}
        self.lanes: list[list[_DecSeries]] = [[], [], [], []]
        self.vals: list[list[int]] = [[], [], [], []]
        self.pending: list[list[array[int]]] = [[], [], [], []]
        self.watched: list[dict[int, int]] = [{}, {}, {}, {}]
        self.present: set[int] = set()
        self.meta = Meta()
        self.t_us = 0
        self.samples = 0
        self.frame_knobs: dict[str, dict[str, Knob]] = {}
        self.frame_server: dict[str, EndpointInfo] = {}
        self.events: tuple[Event, ...] = ()
        self.offsets: list[int] = []
        self._plans: dict[frozenset[str] | None, _Plan] = {}
        self._slots = 0

    @property
    def t(self) -> float:
        return self.t_us / 1e6

    def decode(self, body: bytes) -> None:
        """Apply one poll. Raises `Damaged`; the state is then unusable until the next keyframe."""
        cur = Cursor(body)
        self.t_us += cur.svarint()
        self.frame_knobs = {}
        self.frame_server = {}
        self.events = ()
        changed = False
        while True:
            op = cur.u8()
            if op == OP_END:
                break
            changed = True
            if op == OP_META:
                self.meta = parse_meta(parse_json(cur.str()))
            elif op == OP_EXTRA:
                self._extra(parse_json(cur.str()))
            elif op == OP_DEF:
                self._relayout()
                self._def(cur)
            elif op == OP_MOVE:
                self._relayout()
                self._move(cur)
            elif op == OP_TOGGLE:
                self._toggle(cur)
            else:
                raise Damaged(f"unknown operation {op}")
        if changed:
            self._plans.clear()
            self.samples = sum(
                s.n + s.kind for sid, s in self.series.items() if sid in self.present
            )
        self.offsets = [cur.svarint() for _ in self.meta.scrapes]
        for lane in range(4):
            vals = self.vals[lane]
            if not vals:
                continue
            arr = array(LANE_CODES[lane])
            arr.frombytes(cur.take(len(vals) * LANE_BYTES[lane]))
            if BIG_ENDIAN:
                arr.byteswap()
            pending = self.pending[lane]
            pending.append(arr)
            watched = self.watched[lane]
            for i in watched:
                watched[i] += arr[i]
            if len(pending) >= MAX_PENDING:
                self._fold()
        if cur.pos != cur.end:
            raise Damaged("body longer than its content")

    def _relayout(self) -> None:
        """Before slots move: fold, and forget watched positions (they are about to change)."""
        self._fold()
        for watched in self.watched:
            watched.clear()

    def _fold(self) -> None:
        """Add the pending delta arrays into the values (one C-level `sum` per slot)."""
        for lane, pending in enumerate(self.pending):
            if len(pending) == 1:
                self.vals[lane] = list(map(add, self.vals[lane], pending[0]))
            elif pending:
                self.vals[lane] = list(map(sum, zip(self.vals[lane], *pending, strict=True)))
            pending.clear()

    # -- operations ----------------------------------------------------------------------------

    def _def(self, cur: Cursor) -> None:
        sid = cur.uvarint()
        if sid >= wire.MAX_SERIES:
            raise Damaged(f"series id {sid} over the limit")
        path = parse_path(parse_json(cur.str()))
        kind = cur.u8()
        lane = cur.u8()
        exp = cur.svarint()
        if kind not in (SCALAR, HIST) or (kind == HIST) != (path[0] == "h") or lane > 3:
            raise Damaged("bad series definition")
        if abs(exp) > wire.MAX_EXP:
            raise Damaged(f"exponent {exp} out of range")
        bounds: tuple[float, ...] = ()
        n = 1
        if kind == HIST:
            nb = cur.uvarint()
            if nb > wire.MAX_BOUNDS:
                raise Damaged(f"histogram with {nb} buckets (limit {wire.MAX_BOUNDS})")
            bounds = cur.f64s(nb)
            n = nb + 1
        if self._slots + n > wire.MAX_SLOTS:
            raise Damaged("more values per poll than the limit")
        values = [cur.svarint() for _ in range(n)]
        old = self.series.pop(sid, None)
        if old is not None:
            self._remove(old)
        s = _DecSeries(sid, path, kind, lane, 10.0**exp, bounds, n, len(self.vals[lane]))
        self.series[sid] = s
        self.lanes[lane].append(s)
        self.vals[lane].extend(values)
        self._slots += n

    def _remove(self, s: _DecSeries) -> list[int]:
        vals = self.vals[s.lane]
        taken = vals[s.start : s.start + s.n]
        del vals[s.start : s.start + s.n]
        lane = self.lanes[s.lane]
        lane.remove(s)
        pos = 0
        for other in lane:
            other.start = pos
            pos += other.n
        self._slots -= s.n
        return taken

    def _move(self, cur: Cursor) -> None:
        s = self.series.get(cur.uvarint())
        lane = cur.u8()
        if s is None or lane > 3:
            raise Damaged("move of an unknown series")
        values = self._remove(s)
        s.lane, s.start = lane, len(self.vals[lane])
        self.lanes[lane].append(s)
        self.vals[lane].extend(values)
        self._slots += s.n

    def _toggle(self, cur: Cursor) -> None:
        n = cur.uvarint()
        if n > wire.MAX_SERIES:
            raise Damaged("too many presence changes")
        sid = 0
        for _ in range(n):
            sid += cur.uvarint()
            if sid not in self.series:
                raise Damaged(f"presence of unknown series {sid}")
            self.present ^= {sid}

    def _extra(self, doc: Any) -> None:
        if not isinstance(doc, dict):
            raise Damaged("extra is not an object")
        carry = doc.get("carry")
        if isinstance(carry, dict):
            self.knobs.update(parse_knobs(carry.get("knobs", {})))
            self.server.update(parse_servers(carry.get("server", {})))
        self.frame_knobs = parse_knobs(doc.get("knobs", {}))
        self.frame_server = parse_servers(doc.get("server", {}))
        self.knobs.update(self.frame_knobs)
        self.server.update(self.frame_server)
        events = doc.get("events", [])
        if not isinstance(events, list) or len(events) > 10_000:
            raise Damaged("bad events")
        self.events = tuple(parse_event(e) for e in events)

    # -- materialisation -----------------------------------------------------------------------

    def frame(self, only: frozenset[str] | None = None, *, carry: bool = False) -> Frame:
        """The current poll as a `Frame`; `only` keeps just those signals' scalars/histograms
        (and the GPUs, the host, scrape latency and size only if it names "gpu", "host",
        "scrape_latency", "scrape_bytes"): a light frame for figures that need a few values.

        With `carry`, scrapes that lack knobs/server get the latest ones known (the first frame
        after a seek must bring the configuration the skipped frames announced)."""
        plan = self._plans.get(only)
        if plan is None:
            plan = self._plans[only] = self._plan(only)
        if only is None or any(sp.hists for sp in plan.scrapes):
            self._fold()
        vals, pending, watched = self.vals, self.pending, self.watched

        def val(lane: int, i: int) -> int:
            w = watched[lane]
            v = w.get(i)
            if v is None:  # first read of this slot: sum what is pending, then keep it current
                v = vals[lane][i]
                for arr in pending[lane]:
                    v += arr[i]
                w[i] = v
            return v

        t = self.t_us / 1e6
        scrapes = []
        for sp, off in zip(plan.scrapes, self.offsets, strict=True):
            m = sp.meta
            lat = val(sp.latency[0], sp.latency[1]) / sp.latency[2] if sp.latency else None
            size = round(val(sp.size[0], sp.size[1]) / sp.size[2]) if sp.size else None
            hists = {}
            for k, bounds, (lane, i, div), n, sref in sp.hists:
                cum = list(accumulate(vals[lane][i : i + n]))
                total = cum.pop() / div
                hsum = val(sref[0], sref[1]) / sref[2] if sref else math.nan
                buckets = tuple(map(float, cum)) if div == 1.0 else tuple([c / div for c in cum])
                hists[k] = Histogram(bounds, buckets, total, hsum)
            knobs = self.frame_knobs.get(m.endpoint)
            server = self.frame_server.get(m.endpoint)
            if carry:
                knobs = knobs or self.knobs.get(m.endpoint)
                server = server or self.server.get(m.endpoint)
            scrapes.append(
                Scrape(
                    endpoint=m.endpoint,
                    t=(self.t_us + off) / 1e6,
                    latency_s=lat,
                    size_bytes=size,
                    error=m.error,
                    scalars={k: val(lane, i) / div for k, lane, i, div in sp.scalars},
                    histograms=hists,
                    info=m.info,
                    has_vllm_series=m.vllm,
                    knobs=knobs,
                    server=server,
                )
            )
        gpus = []
        for gm, fields in plan.gpus:
            kw: dict[str, Any] = {}
            for name, (lane, i, div), is_int in fields:
                v = val(lane, i) / div
                kw[name] = round(v) if is_int else v
            gpus.append(GpuReading(gm.index, gm.name, gm.uuid, error=gm.error, **kw))
        host = None
        if plan.host is not None:
            hkw: dict[str, Any] = {}
            for name, (lane, i, div), is_int in plan.host:
                v = val(lane, i) / div
                hkw[name] = round(v) if is_int else v
            host = HostReading(**hkw)
        gpu = GpuStatus(tuple(gpus), self.meta.gpu_unavailable)
        return Frame(t, tuple(scrapes), gpu, host, self.events)

    def _plan(self, only: frozenset[str] | None) -> _Plan:
        by_ep = {m.endpoint: _ScrapePlan(m) for m in self.meta.scrapes}
        gpu_fields: dict[int, list[tuple[str, Ref, bool]]] = {}
        host: list[tuple[str, Ref, bool]] = []
        sums: dict[tuple[str | int, ...], Ref] = {}
        hists: list[_DecSeries] = []
        skip = set() if only is None else {"g", "o", "l", "b"} - {_EXTRA_PARTS.get(x) for x in only}
        for sid in self.present:
            s = self.series[sid]
            ref = (s.lane, s.start, s.div)
            p = s.path
            kind = p[0]
            if kind in skip:
                continue
            if kind == "g":
                name = cast(str, p[2])
                gpu_fields.setdefault(cast(int, p[1]), []).append((name, ref, name in GPU_INT))
            elif kind == "o":
                name = cast(str, p[1])
                host.append((name, ref, name in HOST_INT))
            else:
                sp = by_ep.get(cast(str, p[1]))
                if sp is None:
                    continue
                if kind == "l":
                    sp.latency = ref
                elif kind == "b":
                    sp.size = ref
                elif only is not None and p[2] not in only:
                    continue
                elif kind == "s":
                    sp.scalars.append((_key(p), s.lane, s.start, s.div))
                elif kind == "hs":
                    sums[p[1:]] = ref
                else:
                    hists.append(s)
        for s in hists:
            sp = by_ep[cast(str, s.path[1])]
            ref = (s.lane, s.start, s.div)
            sp.hists.append((_key(s.path), s.bounds, ref, s.n, sums.get(s.path[1:])))
        for sp in by_ep.values():
            sp.scalars.sort(key=lambda x: x[0])
            sp.hists.sort(key=lambda x: x[0])
        gpus = (
            []
            if "g" in skip
            else [(g, sorted(gpu_fields.get(g.index, []))) for g in self.meta.gpus]
        )
        return _Plan(
            [by_ep[m.endpoint] for m in self.meta.scrapes],
            gpus,
            sorted(host) if self.meta.host and "o" not in skip else None,
        )


_EXTRA_PARTS = {"gpu": "g", "host": "o", "scrape_latency": "l", "scrape_bytes": "b"}
"""Names `only` takes for what is not a vLLM signal: without them a light frame skips these."""


def _key(p: Path) -> SeriesKey:
    return SeriesKey(cast(str, p[2]), cast(str, p[3]), cast(str, p[4]), cast(str, p[5]))
