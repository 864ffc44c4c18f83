"""Reading a trace back: header, index, frames from any time, and damage handled once.

The file is memory-mapped, so opening a day-long trace costs the index, not the file: the
footer lists every keyframe (time, offset), and a seek decodes forward from the last keyframe
before the target, at most `KEYFRAME_EVERY` polls. Without a footer (the recorder was killed or
the disk filled), or with one that says the impossible (`index` checks it), the index is
rebuilt by walking the record headers, checking each CRC.

Damage is expected, not exceptional: a truncated or garbled tail, or a bad region inside, ends
or skips decoding at that record (resuming at the next keyframe, found by its sync marker and
CRC) and produces exactly one warning per reader. What cannot be a trace at all (wrong magic, no
header, a newer format) raises `TraceError` with one line; the CLI turns it into UNKNOWN.

Nothing here evaluates what it reads: JSON and fixed-width numbers only, every size checked
against `wire`'s limits before allocation, every string cleaned before it can reach a screen.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import mmap
import os
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from vtop import untrusted
from vtop.files import NotRegularFile, open_regular
from vtop.model import Frame
from vtop.trace import wire
from vtop.trace.decoder import Decoder
from vtop.trace.index import Keyframe, TraceStats, is_time, read_index, shown
from vtop.trace.wire import Damaged


class TraceError(Exception):
    """The file cannot be read as a trace at all; the message is one line."""


Warn = Callable[[str], None]


@dataclass(slots=True)
class Header:
    """The header record, validated; unknown fields are kept in `raw`."""

    format: int
    vtop: str
    start_t: float | None
    created: str
    sources: list[str]
    interval_s: float | None
    endpoints: list[dict[str, Any]]
    gpus: list[str]
    raw: dict[str, Any] = field(default_factory=dict)


class Poll:
    """One decoded poll, valid while the iteration that yielded it stands on it."""

    __slots__ = ("decoder", "first", "t")

    def __init__(self) -> None:
        self.t = 0.0
        self.decoder = Decoder()
        self.first = True

    def frame(self, only: frozenset[str] | None = None) -> Frame:
        """The poll as a `Frame`; `only` keeps just those signals' scalars and histograms."""
        return self.decoder.frame(only, carry=self.first)

    @property
    def samples(self) -> int:
        return self.decoder.samples


def shown_name(path: str | os.PathLike[str]) -> str:
    """The name a trace goes by in what vtop prints (a reader's warnings, a document's
    source): its file's name, made inert, since a stranger may have named it."""
    return untrusted.clean(os.path.basename(os.fspath(path)), 200)


class TraceReader:
    """A trace opened for reading. Use as a context manager or call `close()`."""

    def __init__(self, path: str | os.PathLike[str], *, warn: Warn | None = None) -> None:
        self.path = os.fspath(path)
        self.name = shown_name(self.path)
        self._warn = warn
        self.warning: str | None = None
        """The damage the reader met first (it says it once, to `warn` where one was given)."""
        try:  # a FIFO or a device would block a plain open (and then the read) forever
            fd = open_regular(self.path)
        except NotRegularFile as exc:
            raise TraceError(f"{exc}; a trace is a file written by vtop --record") from None
        except OSError as exc:
            raise TraceError(f"cannot open {self.path}: {exc.strerror}") from None
        self._file = open(fd, "rb")  # noqa: SIM115 - kept open for the mmap
        self._end: float | None = None
        self._end_known = False
        try:
            self.size = os.fstat(self._file.fileno()).st_size
            if self.size < wire.PREAMBLE.size:
                raise TraceError(f"{self.path} is not a vtop trace (too short)")
            self._mm = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
            self._open()
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> TraceReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        mm: mmap.mmap | None = getattr(self, "_mm", None)
        if mm is not None:
            # A view still held (an iteration left suspended) keeps the map; the OS frees it.
            with contextlib.suppress(BufferError):
                mm.close()
            del self._mm
        self._file.close()

    # -- opening -------------------------------------------------------------------------------

    def _open(self) -> None:
        magic, version, _flags = wire.PREAMBLE.unpack_from(self._mm, 0)
        if magic != wire.MAGIC:
            raise TraceError(f"{self.path} is not a vtop trace")
        if version > wire.FORMAT_VERSION:
            raise TraceError(
                f"{self.path} uses trace format {version}, newer than this vtop reads "
                f"({wire.FORMAT_VERSION}); upgrade vtop to replay it"
            )
        if version < 1:
            raise TraceError(f"{self.path} has an invalid trace format number {version}")
        self.format = version
        rec = self._record_at(wire.PREAMBLE.size)
        if rec is None or rec[0] != wire.HEADER:
            if rec is not None:
                rec[1].release()
            raise TraceError(f"{self.path} has no readable header; it is not a usable trace")
        try:
            self.header = _parse_header(rec[1], self.path)
        finally:
            rec[1].release()  # else the map cannot close, and its BufferError hides the error
        self.data_start = rec[2]
        self.indexed = self._load_index()
        if not self.indexed:
            self._scan()
        self.start = self.keyframes[0].t if self.keyframes else None

    @property
    def end(self) -> float | None:
        """Time of the last poll: from the footer, else by decoding the last keyframe's
        segment (once, when first asked: `trace info` never asks, its totals walk it all)."""
        if not self._end_known:
            self._find_end()
        return self._end

    def _record_at(self, pos: int) -> tuple[int, memoryview, int] | None:
        """(kind, payload, next offset) of a sound record at `pos`, or None."""
        if pos + wire.RECORD.size > self.size:
            return None
        kind, length, crc = wire.RECORD.unpack_from(self._mm, pos)
        end = pos + wire.RECORD.size + length
        if kind not in wire.KINDS or length > wire.MAX_PAYLOAD or end > self.size:
            return None
        payload = memoryview(self._mm)[pos + wire.RECORD.size : end]
        if wire.record_crc(kind, length, payload) != crc:
            payload.release()
            return None
        return kind, payload, end

    def _load_index(self) -> bool:
        self.keyframes: list[Keyframe] = []
        self.damage: list[tuple[int, int]] = []
        """(start, end) of each unreadable region found (by `_scan` or `check`)."""
        self.data_end = self.size
        self.totals: TraceStats | None = None
        tail = self._record_at(self.size - wire.TRAILER_SIZE) if self.size > 64 else None
        if tail is None or tail[0] != wire.TRAILER:
            if tail is not None:
                tail[1].release()
            return False
        (index_at,) = wire.TRAILER_BODY.unpack(tail[1])
        tail[1].release()
        rec = self._record_at(index_at) if self.data_start <= index_at < self.size else None
        if rec is None or rec[0] != wire.INDEX:
            if rec is not None:
                rec[1].release()
            return False
        payload = bytes(rec[1])
        rec[1].release()
        index = read_index(payload, index_at=index_at, data_start=self.data_start, size=self.size)
        if isinstance(index, str):  # a sound record that says the impossible: read the records
            self.warn(f"{self.name}: its index {index}; rebuilding it from the records")
            return False
        self.keyframes, self.totals = index.keyframes, index.totals
        self._end, self._end_known = index.end, True
        self.data_end = index_at
        return True

    def _scan(self) -> None:
        """Rebuild the index by walking the records; note damage (warned once, later)."""
        pos = self.data_start
        polls = 0
        while pos < self.size:
            rec = self._record_at(pos)
            if rec is None:
                nxt = self._resync(pos + 1)
                self.damage.append((pos, nxt))
                if nxt >= self.size:
                    break
                pos = nxt
                continue
            kind, payload, end = rec
            if kind == wire.KEYFRAME:
                head = (
                    wire.KEYFRAME_HEAD.unpack_from(payload, 0)
                    if len(payload) >= wire.KEYFRAME_HEAD.size
                    else None
                )
                if head is None or not 0 <= head[1] <= wire.MAX_T_US:
                    payload.release()
                    self.damage.append((pos, end))
                    pos = end
                    continue
                self.keyframes.append(Keyframe(head[1] / 1e6, pos, polls))
                polls += 1
            elif kind == wire.DELTA and self.keyframes:
                polls += 1
            payload.release()
            pos = end
        self._warn_damage()

    def _warn_damage(self) -> None:
        if self.damage:
            start, _ = self.damage[0]
            lost = sum(b - a for a, b in self.damage)
            where = (
                "at the end"
                if len(self.damage) == 1 and self.damage[0][1] >= self.size
                else (f"in {len(self.damage)} place(s)")
            )
            self.warn(
                f"{self.name}: {lost} damaged or truncated bytes {where} "
                f"(first at byte {start}); replaying what precedes and follows them"
            )

    def check(self) -> None:
        """Check every record's CRC, warning (once) of damage; for a trace with a footer,
        whose index and totals are read without touching the polls (opening a trace without
        one already walked them). Costs a pass over the file, no decoding."""
        if not self.indexed:
            return
        pos = self.data_start
        while pos < self.data_end:
            rec = self._record_at(pos)
            if rec is None:
                nxt = min(self._resync(pos + 1), self.data_end)
                self.damage.append((pos, nxt))
                pos = nxt
                continue
            rec[1].release()
            pos = rec[2]
        self._warn_damage()

    def _resync(self, pos: int) -> int:
        """Offset of the next sound keyframe record at or after `pos` (or the file size)."""
        mm = self._mm
        while True:
            hit = mm.find(wire.KEYFRAME_SYNC, pos + wire.RECORD.size)
            if hit < 0:
                return self.size
            start = hit - wire.RECORD.size
            rec = self._record_at(start)
            if rec is not None and rec[0] == wire.KEYFRAME:
                rec[1].release()
                return start
            pos = hit + 1 - wire.RECORD.size

    def _find_end(self) -> None:
        """Time of the last poll: decode the last keyframe's segment."""
        end = None
        if self.keyframes:
            for t, _ in self._walk(self.keyframes[-1]):
                end = t
        self._end, self._end_known = end, True

    def warn(self, message: str) -> None:
        """One warning per reader; later damage is silent (the first one said it)."""
        if self.warning is None:
            self.warning = message
            if self._warn is not None:
                self._warn(message)

    # -- reading -------------------------------------------------------------------------------

    def _walk(
        self, key: Keyframe, decoder: Decoder | None = None
    ) -> Iterator[tuple[float, Decoder]]:
        """Decode from a keyframe to the end; yields after each poll. Damage: warn, resync."""
        dec = decoder or Decoder()
        pos = key.offset
        spent = dec.cost
        zd: Any = None
        head_us: int | None = None
        while pos < self.data_end:
            rec = self._record_at(pos)
            if rec is None:
                nxt = self._resync(pos + 1)
                nxt = min(nxt, self.data_end)
                self.warn(f"{self.name}: damaged record at byte {pos}; skipped {nxt - pos} bytes")
                pos, zd = nxt, None
                continue
            kind, payload, pos = rec
            try:
                if kind == wire.KEYFRAME:
                    dec.reset()
                    zd = zlib.decompressobj(-15)
                    data = bytes(payload[wire.KEYFRAME_HEAD.size :])
                    head_us = wire.KEYFRAME_HEAD.unpack_from(payload)[1] if data else None
                elif kind == wire.DELTA and zd is not None:
                    data = bytes(payload)
                else:
                    continue
                body = zd.decompress(data + wire.SYNC_TAIL, wire.MAX_BODY)
                if zd.unconsumed_tail:
                    raise Damaged("a poll decompresses to more than the limit")
                dec.decode(body)
                if kind == wire.KEYFRAME and dec.t_us != head_us:
                    raise Damaged("a keyframe whose poll time is not its own")
            except (Damaged, zlib.error) as exc:
                self.warn(
                    f"{self.name}: bad poll data at byte {pos}: {untrusted.clean(exc, 200)}; "
                    "skipping to the next keyframe"
                )
                zd = None
                continue
            finally:
                payload.release()
            if dec.cost - spent > wire.COST_PER_BYTE * (pos - key.offset) + wire.COST_ALLOWANCE:
                self.warn(
                    f"{self.name}: the polls from byte {pos} on cost far more to decode than "
                    "their size (no recording does that: crafted or damaged); not read"
                )
                return
            yield dec.t, dec

    def keyframe_before(self, t: float | None) -> Keyframe | None:
        if not self.keyframes:
            return None
        if t is None:
            return self.keyframes[0]
        i = bisect.bisect_right([k.t for k in self.keyframes], t) - 1
        return self.keyframes[max(0, i)]

    def polls(self, start: float | None = None, end: float | None = None) -> Iterator[Poll]:
        """Polls with start <= t <= end, decoded from the keyframe before `start`.

        Each `Poll` materialises its frame on demand (in full, or only some signals), and is
        valid until the iteration moves on. The first one carries the configuration that the
        skipped polls announced, so a seek never loses the knobs."""
        key = self.keyframe_before(start)
        if key is None:
            return
        poll = Poll()
        for t, dec in self._walk(key):
            if start is not None and t < start:
                continue
            if end is not None and t > end:
                return
            poll.t, poll.decoder = t, dec
            yield poll
            poll.first = False

    def frames(
        self,
        start: float | None = None,
        end: float | None = None,
        *,
        only: frozenset[str] | None = None,
    ) -> Iterator[Frame]:
        """Frames with start <= t <= end; `only` keeps just those signals (see `polls`)."""
        for poll in self.polls(start, end):
            yield poll.frame(only)

    def times(self, start: float | None = None, end: float | None = None) -> Iterator[float]:
        """Poll times, without materialising frames."""
        key = self.keyframe_before(start)
        if key is None:
            return
        for t, _ in self._walk(key):
            if start is not None and t < start:
                continue
            if end is not None and t > end:
                return
            yield t

    def stats(self) -> TraceStats:
        """Polls, samples and span: from the footer, else by decoding the whole trace."""
        if self.totals is not None:
            return self.totals
        polls = samples = 0
        t_first: float | None = None
        t_last: float | None = None
        key = self.keyframe_before(None)
        if key is not None:
            for t, dec in self._walk(key):
                polls += 1
                samples += dec.samples
                t_first = t if t_first is None else t_first
                t_last = t
        self.totals = TraceStats(polls, samples, t_first, t_last, self.size)
        if not self._end_known and self.warning is None:
            self._end, self._end_known = t_last, True  # the walk passed the last keyframe too
        return self.totals


def _parse_header(payload: memoryview, path: str) -> Header:
    """The header, each field a vtop writes checked: a wrong one is a `TraceError` naming it
    (unknown fields are kept, unread, in `raw`)."""
    try:
        doc = json.loads(bytes(payload))
    except (ValueError, RecursionError):
        raise TraceError(f"{path} has an unreadable header (not JSON)") from None
    if not isinstance(doc, dict):
        raise TraceError(f"{path} has a header that is not a JSON object")

    def bad(key: str, what: str) -> TraceError:
        return TraceError(f"{path}: header field {key} is {shown(doc[key])}, not {what}")

    def text(key: str, limit: int = 200) -> str:
        v = doc.get(key)
        if v is not None and not isinstance(v, str):
            raise bad(key, "a string")
        return untrusted.clean(v, limit) if v else ""

    def strings(key: str) -> list[str]:
        v = doc.get(key)
        if v is None:
            return []
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v[:64]):
            raise bad(key, "a list of strings")
        return [untrusted.clean(x, 300) for x in v[:64]]

    fmt = doc.get("format", wire.FORMAT_VERSION)
    if not isinstance(fmt, int) or isinstance(fmt, bool) or not 1 <= fmt <= wire.FORMAT_VERSION:
        raise bad("format", f"a format this vtop reads (1 to {wire.FORMAT_VERSION})")
    start = doc.get("start_t")
    if start is not None and not is_time(start):
        raise bad("start_t", "a time")
    interval = doc.get("interval_s")
    if interval is not None and not (
        isinstance(interval, int | float)
        and not isinstance(interval, bool)
        and wire.MIN_INTERVAL_S <= interval <= wire.MAX_INTERVAL_S
    ):
        raise bad(
            "interval_s", f"an interval of {wire.MIN_INTERVAL_S:g} to {wire.MAX_INTERVAL_S:g} s"
        )
    eps = doc.get("endpoints")
    if eps is not None and not (isinstance(eps, list) and all(isinstance(e, dict) for e in eps)):
        raise bad("endpoints", "a list of objects")
    return Header(
        format=fmt,
        vtop=text("vtop", 40),
        start_t=None if start is None else float(start),
        created=text("created", 40),
        sources=strings("sources"),
        interval_s=None if interval is None else float(interval),
        endpoints=list(eps[:64]) if eps else [],
        gpus=strings("gpus"),
        raw=doc,
    )
