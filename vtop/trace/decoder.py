"""Record bodies back into polls, as fast as a day-long trace needs and trusting nothing.

The format is `codec`'s: per poll, dense lanes of integer deltas. The decoder keeps each lane's
values in one list (`lanes` keeps the order of its series) and applies a poll's deltas lazily: a
poll's arrays wait in `pending` and are added in one C-level `sum` per slot only when a full
frame (or `MAX_PENDING`) needs them, while the slots that light frames read are *watched* and
kept current poll by poll. `frame(only=...)` asks `plan` once per set of signals and layout
where each value lives, so a report that reads a dozen values per poll does not touch the other
few hundred.

Nothing in a body is trusted: every count is checked against the limits in `wire` before it
allocates, and the JSON parts (metadata, extras, series paths) are checked by `metadata`, which
cuts every string and strips it of control characters before anything can print it.
"""

from __future__ import annotations

import math
import re
from array import array
from itertools import accumulate
from operator import add, ge
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
from vtop.trace.lanes import DecodedSeries, Lane
from vtop.trace.metadata import (
    Meta,
    Path,
    parse_event,
    parse_json,
    parse_knobs,
    parse_meta,
    parse_path,
    parse_servers,
)
from vtop.trace.plan import Plan, plan_frame
from vtop.trace.wire import Cursor, Damaged

# What decoding costs, in work units of about a nanosecond each on a slow core: an estimate
# per operation, charged as the body is read, that `reader` holds against the bytes read
# (`wire.COST_PER_BYTE`). Deflate can make a body a thousand times its bytes, and a body that
# repeats the one before costs almost nothing to store; counting what it costs to apply is
# what keeps a small file from buying minutes of work.
COST_BODY: Final = 15_000
"""A body: its record, inflating it, the cursor, the poll it yields."""
COST_BYTE: Final = 30
"""Each byte of a body's operations (strings, varints)."""
COST_JSON: Final = 60
"""Each byte of JSON parsed (metadata, extras, a series path not seen before)."""
COST_OP: Final = 8_000
"""A definition or a move: the series, its place in the lane, the relayout."""
COST_VALUE: Final = 150
"""Each value a definition sets, each slot a move carries."""
COST_FLIP: Final = 350
"""Each presence change, each watched slot kept current."""
COST_SLOT: Final = 50
"""Each slot of a lane whose deltas are added in as an array (many are not zero)."""
COST_SCAN: Final = 2
COST_SPARSE: Final = 700
"""Each byte of a lane with few changes, scanned; each changed byte of it, added in."""
COST_COPY: Final = 5
"""Each slot of a lane that a relayout copies."""
SPARSE: Final = 16
"""A lane with fewer than one changed byte in this many is added in slot by slot."""
_NONZERO: Final = re.compile(rb"[^\x00]+")

MAX_PENDING: Final = 64
"""Polls of deltas a decoder holds before adding them all in. Slots that frames read are
*watched* and kept current poll by poll; the rest wait in the pending arrays and are added in
one C-level `sum` per slot when a full frame (or the limit) needs them. A report that reads a
dozen values per poll of a day-long trace so skips adding the other few hundred each poll."""


class Decoder:
    """Applies record bodies in order; `frame()` materialises the current poll."""

    def __init__(self) -> None:
        self.knobs: dict[str, dict[str, Knob]] = {}
        """Latest knobs per endpoint seen so far (carried across keyframes)."""
        self.server: dict[str, EndpointInfo] = {}
        self._paths: dict[str, Path] = {}
        """Series paths by their JSON text: a keyframe (and a redefinition) names them again."""
        self.cost = 0
        """Work units spent so far (see `COST_BYTE`), across keyframes."""
        self.reset()

    def reset(self) -> None:
        self.series: dict[int, DecodedSeries] = {}
        self.lanes: list[Lane] = [Lane(), Lane(), Lane(), Lane()]
        self.vals: list[list[int]] = [[], [], [], []]
        self.pending: list[list[array[int]]] = [[], [], [], []]
        self.watched: list[dict[int, int]] = [{}, {}, {}, {}]
        self.present: set[int] = set()
        self.meta = Meta()
        self._meta_text = ""
        self.t_us = 0
        self.samples = 0
        """Values in the present series (a histogram's count too): kept as ops change them."""
        self._weight: dict[int, int] = {}
        self.frame_knobs: dict[str, dict[str, Knob]] = {}
        self.frame_server: dict[str, EndpointInfo] = {}
        self.events: tuple[Event, ...] = ()
        self.offsets: list[int] = []
        self._plans: dict[frozenset[str] | None, Plan] = {}
        self._slots = 0
        # One body's relayout, applied at its end (`_commit`): slots taken out of each lane
        # (start, count, position in the lane) and the series to append, in order.
        self._taken: list[list[tuple[int, int, int]]] = [[], [], [], []]
        self._added: list[list[DecodedSeries]] = [[], [], [], []]
        self._touched: set[int] = set()

    @property
    def t(self) -> float:
        return self.t_us / 1e6

    def decode(self, body: bytes) -> None:
        """Apply one poll. Raises `Damaged`; the state is then unusable until the next keyframe.

        The cost is linear in the body: each op touches what it names (a series, its slots),
        never every series. What the encoder writes once per poll (the metadata, the extras,
        the presence changes, a series' definition or move) is refused when a body repeats
        it, so the operations of one body are bounded by the series it holds."""
        self.cost += COST_BODY
        cur = Cursor(body)
        self.t_us += cur.svarint()
        if not 0 <= self.t_us <= wire.MAX_T_US:
            raise Damaged("a poll time out of range")
        self.frame_knobs = {}
        self.frame_server = {}
        self.events = ()
        once = 0
        layout = False
        while True:
            op = cur.u8()
            if op == OP_END:
                break
            if op in (OP_META, OP_EXTRA, OP_TOGGLE):
                if once & (1 << op):
                    raise Damaged(f"operation {op} twice in one poll")
                once |= 1 << op
            if op == OP_META:
                text = cur.str()
                if text != self._meta_text:
                    self.cost += COST_JSON * len(text)
                    self.meta = parse_meta(parse_json(text))
                    self._meta_text = text
                    layout = True
            elif op == OP_EXTRA:
                text = cur.str()
                self.cost += COST_JSON * len(text)
                self._extra(parse_json(text))
            elif op == OP_DEF:
                self._relayout()
                self._def(cur)
            elif op == OP_MOVE:
                self._relayout()
                self._move(cur)
            elif op == OP_TOGGLE:
                self._toggle(cur)
                layout = True
            else:
                raise Damaged(f"unknown operation {op}")
        self.cost += COST_BYTE * cur.pos
        if self._touched:
            self._commit()
            layout = True
        if layout:
            self._plans.clear()
        self.offsets = [cur.svarint() for _ in self.meta.scrapes]
        if self.offsets and (
            self.t_us + min(self.offsets) < 0 or self.t_us + max(self.offsets) > wire.MAX_T_US
        ):
            raise Damaged("a scrape time out of range")
        for lane in range(4):
            vals = self.vals[lane]
            if not vals:
                continue
            data = cur.take(len(vals) * LANE_BYTES[lane])
            changed = len(data) - data.count(0)
            if not changed:
                continue  # nothing changed in this lane: nothing to add, now or later
            if changed * SPARSE < len(data):
                self.cost += COST_SCAN * len(data) + COST_SPARSE * changed
                self._add_sparse(lane, data)
                continue
            self.cost += COST_SLOT * len(vals) + COST_FLIP * len(self.watched[lane])
            arr = array(LANE_CODES[lane])
            arr.frombytes(data)
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

    def _add_sparse(self, lane: int, data: bytes) -> None:
        """Add a lane's deltas where few are not zero: straight into the values, slot by slot
        (a fleet of idle servers changes a counter or two of each; the dense path would add
        every slot of the fleet)."""
        vals, watched, width = self.vals[lane], self.watched[lane], LANE_BYTES[lane]
        last = -1
        for m in _NONZERO.finditer(data):
            for i in range(m.start() // width, (m.end() - 1) // width + 1):
                if i == last:
                    continue
                last = i
                d = int.from_bytes(data[i * width : (i + 1) * width], "little", signed=True)
                vals[i] += d
                if i in watched:
                    watched[i] += d

    def _relayout(self) -> None:
        """Before the first slot of a body moves: fold, and forget watched positions (they
        are about to change)."""
        if self._touched:
            return
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
        text = cur.str()
        path = self._paths.get(text)
        if path is None:
            self.cost += COST_JSON * len(text)
            path = parse_path(parse_json(text))
            if len(self._paths) >= wire.MAX_SERIES:
                self._paths.clear()
            self._paths[text] = path
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
            if not all(map(math.isfinite, bounds)) or any(map(ge, bounds, bounds[1:])):
                raise Damaged("histogram bounds not finite and ascending")
            n = nb + 1
        old = self.series.get(sid)
        slots = self._slots + n - (old.n if old is not None else 0)
        if slots > wire.MAX_SLOTS:
            raise Damaged("more values per poll than the limit")
        self.cost += COST_OP + COST_VALUE * n
        values = [cur.svarint() for _ in range(n)]
        if old is not None:
            self._take(old)
        s = DecodedSeries(sid, path, kind, lane, 10.0**exp, bounds, n, values=values)
        self.series[sid] = s
        self._added[lane].append(s)
        self._touched.add(sid)
        self._slots = slots
        self._weight[sid] = n + kind
        if sid in self.present:
            self.samples += n + kind - (old.n + old.kind if old is not None else 0)

    def _take(self, s: DecodedSeries) -> list[int]:
        """Schedule `s`'s slots out of its lane (at the body's end); returns their values."""
        if s.sid in self._touched:
            raise Damaged(f"series {s.sid} defined or moved twice in one poll")
        start = self.lanes[s.lane].start(s.pos)
        self._taken[s.lane].append((start, s.n, s.pos))
        return self.vals[s.lane][start : start + s.n]

    def _move(self, cur: Cursor) -> None:
        s = self.series.get(cur.uvarint())
        lane = cur.u8()
        if s is None or lane > 3:
            raise Damaged("move of an unknown series")
        self.cost += COST_OP + COST_VALUE * s.n
        s.values = self._take(s)
        s.lane = lane
        self._added[lane].append(s)
        self._touched.add(s.sid)

    def _commit(self) -> None:
        """Apply one body's relayout: per lane, one pass that keeps the slots between those
        taken out, then the appended series' values (C-level slices, not a loop per slot)."""
        for ln in range(4):
            taken, added = self._taken[ln], self._added[ln]
            if not taken and not added:
                continue
            lane, vals = self.lanes[ln], self.vals[ln]
            self.cost += COST_COPY * len(vals)
            if taken:
                taken.sort()
                kept: list[int] = []
                prev = 0
                for start, n, pos in taken:
                    kept += vals[prev:start]
                    prev = start + n
                    lane.discard(pos, n)
                kept += vals[prev:]
                vals = kept
            for s in added:
                lane.append(s)
                vals += cast(list[int], s.values)
                s.values = None
            self.vals[ln] = vals
            taken.clear()
            added.clear()
            lane.sweep()
        self._touched.clear()

    def _toggle(self, cur: Cursor) -> None:
        n = cur.uvarint()
        if n > wire.MAX_SERIES:
            raise Damaged("too many presence changes")
        self.cost += COST_FLIP * n
        run = cur.data[cur.pos : cur.pos + n]
        if len(run) == n and run.isascii():  # every delta one byte: read them in one go
            cur.pos += n
            sids = list(accumulate(run))
        else:
            sids = list(accumulate(cur.uvarint() for _ in range(n)))
        flipped = set(sids)
        if len(flipped) != n:  # deltas after the first are at least 1: ascending, distinct
            raise Damaged("presence changes out of order")
        if not self.series.keys() >= flipped:
            raise Damaged("presence of an unknown series")
        gone = flipped & self.present
        came = flipped - gone
        weight = self._weight.__getitem__
        self.samples += sum(map(weight, came)) - sum(map(weight, gone))
        self.present ^= flipped

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
            plan = self._plans[only] = plan_frame(
                self.meta, self.series, self.present, self.lanes, only
            )
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
