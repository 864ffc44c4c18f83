"""Hostile traces, byte by byte: bodies the encoder would never write, framed as a real file.

`tests/tracegen.py` makes realistic frames and lets the real `Recorder` write them; an attacker
does not use the recorder. The tests of the reader's limits, the fuzz suite and
`bench/trace_open.py` need files whose bodies are chosen op by op (a poll that redefines every
series, one that toggles them all, thousands of polls of one byte), so this module writes the
format of docs/trace-format.md directly: the preamble, a header record, keyframe and delta
records over one shared deflate stream as `TraceWriter` does, and optionally the index footer.
Each `*_trace` function returns the bytes of one family of worst cases, sized by its arguments.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterable, Sequence
from typing import Any

from vtop.trace import wire

OP_END, OP_META, OP_EXTRA, OP_DEF, OP_MOVE, OP_TOGGLE = range(6)
META_ONE = {"scrapes": [["http://e", None, True, {}]], "gpu": ["none", []], "host": False}


class Body:
    """One poll's body after its time, op by op (docs/trace-format.md, "A poll's body");
    `TraceFile.poll` puts the time in front."""

    def __init__(self) -> None:
        self.out = bytearray()

    def meta(self, doc: Any = None) -> Body:
        self.out.append(OP_META)
        wire.put_str(self.out, json.dumps(META_ONE if doc is None else doc))
        return self

    def extra(self, doc: Any) -> Body:
        self.out.append(OP_EXTRA)
        wire.put_str(self.out, json.dumps(doc))
        return self

    def define(
        self, sid: int, path: Sequence[Any], *, lane: int = 0, exp: int = 0, value: int = 0
    ) -> Body:
        """A scalar series (`path` as the encoder names it)."""
        self.out.append(OP_DEF)
        wire.put_uvarint(self.out, sid)
        wire.put_str(self.out, json.dumps(list(path), separators=(",", ":")))
        self.out += bytes([0, lane])
        wire.put_svarint(self.out, exp)
        wire.put_svarint(self.out, value)
        return self

    def move(self, sid: int, lane: int) -> Body:
        self.out.append(OP_MOVE)
        wire.put_uvarint(self.out, sid)
        self.out.append(lane)
        return self

    def toggle(self, sids: Iterable[int], *, raw_deltas: Sequence[int] | None = None) -> Body:
        """Presence flips; `raw_deltas` writes the deltas as given (even if not ascending)."""
        ids = sorted(sids)
        deltas = (
            raw_deltas
            if raw_deltas is not None
            else [b - a for a, b in zip([0, *ids], ids, strict=False)]
        )
        self.out.append(OP_TOGGLE)
        wire.put_uvarint(self.out, len(deltas))
        for d in deltas:
            wire.put_uvarint(self.out, d)
        return self

    def end(
        self, *, scrapes: int = 1, offsets: Sequence[int] = (), lanes: Sequence[bytes] = ()
    ) -> bytes:
        """Close the ops; the scrapes' offsets (`scrapes` of 0 unless given), then the lane
        bytes as given."""
        self.out.append(OP_END)
        for off in offsets or [0] * scrapes:
            wire.put_svarint(self.out, off)
        for lane in lanes:
            self.out += lane
        return bytes(self.out)


def scalar_path(i: int, signal: str = "vllm:num_requests_running") -> list[str]:
    return ["s", "http://e", signal, "m", "0", f"l{i}"]


class TraceFile:
    """A trace assembled record by record, as `TraceWriter` frames them."""

    def __init__(self, header: bytes | None = None) -> None:
        self.data = bytearray(wire.PREAMBLE.pack(wire.MAGIC, wire.FORMAT_VERSION, 0))
        head = header if header is not None else json.dumps({"format": 1}).encode()
        self.data += wire.frame_record(wire.HEADER, head)
        self.keyframes: list[tuple[int, int, int]] = []
        self.polls = 0
        self.t_us = 1_750_000_000_000_000
        self._comp: Any = None

    def poll(
        self,
        body: bytes,
        *,
        keyframe: bool = False,
        dt_us: int = 1_000_000,
        t_us: int | None = None,
    ) -> None:
        """Append a poll `dt_us` after the last; its body starts with its time (absolute in a
        keyframe, as the encoder writes it) unless `t_us` says what to write instead."""
        if keyframe or self._comp is None:
            self._comp = zlib.compressobj(6, zlib.DEFLATED, -15, 9)
            keyframe = True
        self.t_us += dt_us
        head = bytearray()
        wire.put_svarint(head, t_us if t_us is not None else self.t_us if keyframe else dt_us)
        data = self._comp.compress(bytes(head) + body) + self._comp.flush(zlib.Z_SYNC_FLUSH)
        data = data[: -len(wire.SYNC_TAIL)]
        if keyframe:
            self.keyframes.append((self.t_us, len(self.data), self.polls))
            sync = wire.KEYFRAME_HEAD.pack(wire.KEYFRAME_SYNC, self.t_us, self.polls)
            self.data += wire.frame_record(wire.KEYFRAME, sync + data)
        else:
            self.data += wire.frame_record(wire.DELTA, data)
        self.polls += 1

    def finish(self, *, footer: bool = True, summary: dict[str, Any] | None = None) -> bytes:
        """The file; with `footer`, the index and trailer (`summary` replaces the totals)."""
        out = bytearray(self.data)
        if footer:
            body = bytearray(struct.pack("<I", len(self.keyframes)))
            for entry in self.keyframes:
                body += wire.INDEX_ENTRY.pack(*entry)
            totals = summary or {
                "polls": self.polls,
                "samples": self.polls,
                "t_first": self.keyframes[0][0] / 1e6 if self.keyframes else None,
                "t_last": self.t_us / 1e6 if self.keyframes else None,
            }
            body += json.dumps(totals).encode()
            index_at = len(out)
            out += wire.frame_record(wire.INDEX, bytes(body))
            out += wire.frame_record(wire.TRAILER, wire.TRAILER_BODY.pack(index_at))
        return bytes(out)


def redefinition_trace(series: int, polls: int, *, footer: bool = False) -> bytes:
    """Every poll redefines every series (the exponent flips): the storm that was quadratic."""
    f = TraceFile()
    body = Body().meta()
    for i in range(series):
        body.define(i, scalar_path(i))
    f.poll(body.toggle(range(series)).end(lanes=[bytes(series)]), keyframe=True)
    for p in range(1, polls):
        body = Body()
        for i in range(series):
            body.define(i, scalar_path(i), exp=p % 2)
        f.poll(body.end(lanes=[bytes(series)]))
    return f.finish(footer=footer)


def move_trace(series: int, polls: int, *, footer: bool = False) -> bytes:
    """Every poll moves every series to the end of its lane (the other way to relayout)."""
    f = TraceFile()
    body = Body().meta()
    for i in range(series):
        body.define(i, scalar_path(i))
    f.poll(body.toggle(range(series)).end(lanes=[bytes(series)]), keyframe=True)
    for _ in range(1, polls):
        body = Body()
        for i in range(series):
            body.move(i, 0)
        f.poll(body.end(lanes=[bytes(series)]))
    return f.finish(footer=footer)


def toggle_trace(series: int, polls: int, *, footer: bool = False) -> bytes:
    """Every poll flips the presence of every series: a few bytes that name them all."""
    f = TraceFile()
    body = Body().meta()
    for i in range(series):
        body.define(i, scalar_path(i))
    f.poll(body.toggle(range(series)).end(lanes=[bytes(series)]), keyframe=True)
    for _ in range(1, polls):
        f.poll(Body().toggle(range(series)).end(lanes=[bytes(series)]))
    return f.finish(footer=footer)


def tiny_trace(polls: int, *, footer: bool = False) -> bytes:
    """The most polls a byte can buy: one series, nothing changes, a record of a dozen bytes."""
    f = TraceFile()
    f.poll(Body().meta().define(0, scalar_path(0)).toggle([0]).end(lanes=[b"\0"]), keyframe=True)
    for _ in range(1, polls):
        f.poll(Body().end(lanes=[b"\0"]))
    return f.finish(footer=footer)


def churn_trace(series: int, polls: int, *, footer: bool = False) -> bytes:
    """Every slot changes every poll (+1, -1, +1, ...): lanes that deflate to almost nothing
    but must be added in, slot by slot."""
    f = TraceFile()
    body = Body().meta()
    for i in range(series):
        body.define(i, scalar_path(i))
    f.poll(body.toggle(range(series)).end(lanes=[bytes(series)]), keyframe=True)
    up, down = b"\x01" * series, b"\xff" * series
    for p in range(1, polls):
        f.poll(Body().end(lanes=[up if p % 2 else down]))
    return f.finish(footer=footer)


def meta_trace(endpoints: int, polls: int, *, footer: bool = False) -> bytes:
    """Two large metadata documents, alternating: each poll parses one again."""
    f = TraceFile()
    docs = []
    for flavour in ("a", "b"):
        scrapes = [[f"http://{flavour}{i}", None, True, {"k": "v" * 20}] for i in range(endpoints)]
        docs.append({"scrapes": scrapes, "gpu": ["none", []], "host": False})
    f.poll(Body().meta(docs[0]).end(scrapes=endpoints), keyframe=True)
    for p in range(1, polls):
        f.poll(Body().meta(docs[p % 2]).end(scrapes=endpoints))
    return f.finish(footer=footer)
