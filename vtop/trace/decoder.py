"""Record bodies back into polls, as fast as a day-long trace needs and trusting nothing.

The format is `codec`'s: per poll, dense lanes of integer deltas. The decoder keeps each lane's
values in one list and applies a poll's deltas lazily: a poll's arrays wait in `pending` and are
added in one C-level `sum` per slot only when a full frame (or `MAX_PENDING`) needs them, while
the slots that light frames read are *watched* and kept current poll by poll. `frame(only=...)`
builds, once per set of signals and layout, a plan of where each value lives, so a report that
reads a dozen values per poll does not touch the other few hundred.

Nothing in a body is trusted: every count is checked against the limits in `wire` before it
allocates, and the JSON parts (metadata, extras, series paths) are checked by `metadata`, which
cuts every string and strips it of control characters before anything can print it.
"""

from __future__ import annotations

import math
from array import array
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
    Scrape,
    SeriesKey,
)
from vtop.trace import wire
from vtop.trace.codec import (
    BIG_ENDIAN,
    HIST,
    LANE_BYTES,
    LANE_CODES,
    OP_DEF,
    OP_END,
    OP_EXTRA,
    OP_META,
    OP_MOVE,
    OP_TOGGLE,
    SCALAR,
)
from vtop.trace.metadata import (
    GPU_INT,
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
from vtop.trace.wire import Cursor, Damaged

MAX_PENDING: Final = 64
"""Polls of deltas a decoder holds before adding them all in. Slots that frames read are
*watched* and kept current poll by poll; the rest wait in the pending arrays and are added in
one C-level `sum` per slot when a full frame (or the limit) needs them. A report that reads a
dozen values per poll of a day-long trace so skips adding the other few hundred each poll."""


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
