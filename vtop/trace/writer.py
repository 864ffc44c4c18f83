"""Appending polls to a trace file: one framed record per poll, a keyframe every few minutes.

Each poll's body is compressed by one deflate stream shared with the polls before it (that is
where the bytes go: a poll is mostly what the previous one was) and sync-flushed, so the record
is complete on its own once written. The record is built in memory and handed to one
`os.write()`, straight to the kernel: a recorder killed with SIGKILL loses at most the poll it
was writing. Every `KEYFRAME_EVERY` polls the stream starts over (fresh compressor, absolute
values, every series redefined) so a reader can start decoding there; the keyframes' offsets
make the index footer written by `close()` (and they are fsynced, so a power cut loses minutes
at most), which a reader rebuilds by scanning when it is
missing.

The file is created with O_EXCL and mode 0600: an existing file is never overwritten, and a
trace (which names hosts and models) is readable by its owner only. A failed write (disk full,
file-size limit) removes the partial record, raises `TraceWriteError` with one line, and leaves
a file that reads back up to the last complete poll.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

from vtop.model import Frame
from vtop.trace import wire
from vtop.trace.codec import Encoder

KEYFRAME_EVERY = 300
"""Polls between keyframes: at 1 Hz a seek decodes at most five minutes of polls."""
KEYFRAME_BYTES = 512 << 10
"""Compressed bytes between keyframes, whichever comes first (many endpoints, fast polls)."""


class TraceWriteError(Exception):
    """Writing the trace failed; the message is one line naming the file and the cause."""

    def __init__(self, message: str, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno


@dataclass(slots=True)
class Totals:
    polls: int = 0
    samples: int = 0
    t_first: float | None = None
    t_last: float | None = None
    keyframes: list[tuple[int, int, int]] = field(default_factory=list)


class TraceWriter:
    """Creates `path` (never overwriting) and appends frames. Not thread-safe; one writer."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        keyframe_every: int = KEYFRAME_EVERY,
        level: int = 6,
    ) -> None:
        self.path = os.fspath(path)
        self.keyframe_every = max(1, keyframe_every)
        self.level = level
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
        try:
            self._fd = os.open(self.path, flags, 0o600)
        except FileExistsError:
            raise TraceWriteError(f"{self.path} exists; vtop never overwrites a trace") from None
        except OSError as exc:
            raise TraceWriteError(f"cannot create {self.path}: {exc.strerror}") from None
        os.fchmod(self._fd, 0o600)
        self.offset = 0
        self.totals = Totals()
        self.closed = False
        self._encoder = Encoder()
        self._compressor: Any = None
        self._since_key = 0
        self._bytes_since_key = 0
        self._header_written = False
        self._write(wire.PREAMBLE.pack(wire.MAGIC, wire.FORMAT_VERSION, 0))

    @property
    def has_header(self) -> bool:
        return self._header_written

    def write_header(self, header: dict[str, Any]) -> None:
        """The header record; must come before the first frame."""
        if self._header_written:
            raise ValueError("the header is already written")
        doc = {"format": wire.FORMAT_VERSION, **header}
        payload = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()
        self._write(wire.frame_record(wire.HEADER, payload))
        self._header_written = True

    def write(self, frame: Frame) -> int:
        """Append one poll; returns the bytes written."""
        if self.closed:
            raise ValueError("the trace is closed")
        if not self._header_written:
            raise ValueError("write the header first")
        key = (
            self._compressor is None
            or self._since_key >= self.keyframe_every
            or self._bytes_since_key >= KEYFRAME_BYTES
        )
        if key:
            self._encoder.reset()
            self._compressor = zlib.compressobj(self.level, zlib.DEFLATED, -15, 9)
            self._since_key = self._bytes_since_key = 0
        enc = self._encoder.encode(frame)
        data = self._compressor.compress(enc.body) + self._compressor.flush(zlib.Z_SYNC_FLUSH)
        if data.endswith(wire.SYNC_TAIL):
            data = data[: -len(wire.SYNC_TAIL)]
        t_us = round(frame.t * 1e6)
        if key:
            head = wire.KEYFRAME_HEAD.pack(wire.KEYFRAME_SYNC, t_us, self.totals.polls)
            record = wire.frame_record(wire.KEYFRAME, head + data)
            if self.totals.keyframes:
                with contextlib.suppress(OSError):
                    os.fsync(self._fd)
            self.totals.keyframes.append((t_us, self.offset, self.totals.polls))
        else:
            record = wire.frame_record(wire.DELTA, data)
        try:
            self._write(record)
        except TraceWriteError:
            if key:
                self.totals.keyframes.pop()
            raise
        self._since_key += 1
        self._bytes_since_key += len(record)
        totals = self.totals
        totals.polls += 1
        totals.samples += enc.samples
        if totals.t_first is None:
            totals.t_first = frame.t
        totals.t_last = frame.t
        return len(record)

    def close(self) -> None:
        """Write the index footer and close. Idempotent; a failure leaves a scannable file."""
        if self.closed:
            return
        self.closed = True
        try:
            if self._header_written:
                self._write_index()
            os.fsync(self._fd)
        except (TraceWriteError, OSError):
            pass
        finally:
            os.close(self._fd)

    def abandon(self) -> None:
        """Close without the footer (after a write error): the file keeps what it has."""
        if not self.closed:
            self.closed = True
            os.close(self._fd)

    def _write_index(self) -> None:
        t = self.totals
        body = bytearray(wire.INDEX_ENTRY.size * len(t.keyframes) + 4)
        struct.pack_into("<I", body, 0, len(t.keyframes))
        for i, entry in enumerate(t.keyframes):
            wire.INDEX_ENTRY.pack_into(body, 4 + i * wire.INDEX_ENTRY.size, *entry)
        summary = {"polls": t.polls, "samples": t.samples, "t_first": t.t_first, "t_last": t.t_last}
        body += json.dumps(summary, separators=(",", ":")).encode()
        index_at = self.offset
        self._write(wire.frame_record(wire.INDEX, bytes(body)))
        self._write(wire.frame_record(wire.TRAILER, wire.TRAILER_BODY.pack(index_at)))

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        start = self.offset
        try:
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
                self.offset += n
        except OSError as exc:
            if self.offset != start:
                try:
                    os.ftruncate(self._fd, start)
                    self.offset = start
                except OSError:
                    pass
            reason = exc.strerror or type(exc).__name__
            raise TraceWriteError(f"cannot write {self.path}: {reason}", exc.errno) from None
