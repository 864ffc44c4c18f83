"""One poll -> one record body: a series dictionary in the stream, lanes of integer deltas.

Every number a `Frame` holds becomes a *series* with a small integer id, defined in-stream the
first time it appears (`DEF`: its path, its exponent, its lane and its absolute value) and
redefined only when it must change shape. Each poll then stores, per series, the change since
the previous poll as a fixed-point integer:

- counters, gauges and histogram *bins* (not cumulative buckets: one observation changes one
  bin but every bucket above it) are integers and are stored exactly;
- other floats are stored as `q = round(v × 10^e)`, the smallest `e` that represents the value
  exactly, up to a per-series maximum (`max_exp_for`); past it the error of every sample is at
  most `0.5 × 10^-e` (e.g. 0.5 µs for seconds) and never accumulates, because what is
  quantised is the value, not the delta;
- the deltas of a poll are written as dense little-endian arrays, one per *lane* (int8, int16,
  int32, int64); a series moves to a wider lane the first time a delta does not fit (`MOVE`).

Dense lanes cost a byte per unchanged int8 slot, which deflate (shared across polls) squeezes to
almost nothing; in exchange the `decoder` reads a poll with one `array()` and one `map(add)` per
lane, which is what lets a report read 86 400 polls in seconds. Absent series (a failed poll, a
GPU field the card lacks) are tracked with presence toggles and are `None`/missing on replay,
never 0. What is not a number (errors, info labels, the GPU names, knobs and events) travels as
small JSON objects: `META` when it changed, `EXTRA` for what belongs to one poll only.

This module defines the format and encodes; `decoder` reads it back, trusting nothing.
"""

from __future__ import annotations

import json
import math
import sys
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, Final, cast

from vtop.knobs import KnobValue
from vtop.model import Frame, SeriesKey
from vtop.trace import wire
from vtop.trace.metadata import GPU_FLOAT, GPU_INT, HOST_FLOAT, HOST_INT, Path
from vtop.trace.wire import put_str, put_svarint, put_uvarint

SCALAR: Final = 0
HIST: Final = 1
LANE_CODES: Final = ("b", "h", "i", "q")
LANE_BYTES: Final = (1, 2, 4, 8)
LANE_LIMIT: Final = (1 << 7, 1 << 15, 1 << 31, 1 << 63)
BIG_ENDIAN: Final = sys.byteorder == "big"
Q_LIMIT: Final = float(1 << 62)
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
