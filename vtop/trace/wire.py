"""Bytes on disk: the preamble, length+CRC framed records, varints, and every size limit.

A trace is read back by code that may face a file from someone else, so each primitive here
checks its bounds before it allocates: a length is compared with the limit and with what is
left of the buffer before anything is sliced, a varint is at most ten bytes, a string at most
`MAX_STR`. Anything out of bounds raises `Damaged`, which the reader turns into one warning.

Records are `kind u8 | length u32 | crc32 u32 | payload`, little-endian, the CRC covering kind,
length and payload. That framing is what makes the file crash-safe and append-only: a record is
built in memory and written with one `write()`, so a killed recorder leaves at most one partial
record at the end, which the CRC (or the missing bytes) exposes.
"""

from __future__ import annotations

import struct
import zlib
from typing import Final

MAGIC: Final = b"VTOPTRC\x1a"
FORMAT_VERSION: Final = 1
"""The format this vtop writes and the newest it reads."""
PREAMBLE: Final = struct.Struct("<8sHH")
"""magic, format version, flags (0)."""

HEADER: Final = 0x01
"""Payload: the header, UTF-8 JSON."""
KEYFRAME: Final = 0x02
"""Payload: KEYFRAME_HEAD, then a fresh raw-deflate stream holding one poll's body."""
DELTA: Final = 0x03
"""Payload: the continuation of the current deflate stream holding one poll's body."""
INDEX: Final = 0x04
"""Payload: u32 n, n × INDEX_ENTRY, then UTF-8 JSON totals. Written on clean close."""
TRAILER: Final = 0x05
"""Payload: u64 offset of the INDEX record. Always the last 17 bytes of a cleanly closed file."""
KINDS: Final = frozenset({HEADER, KEYFRAME, DELTA, INDEX, TRAILER})

RECORD: Final = struct.Struct("<BII")
KEYFRAME_HEAD: Final = struct.Struct("<4sqI")
"""sync marker b'VTKF', t in µs, poll number: lets a damaged file resync at the next keyframe."""
KEYFRAME_SYNC: Final = b"VTKF"
INDEX_ENTRY: Final = struct.Struct("<qQI")
"""t in µs, file offset of the keyframe record, poll number."""
TRAILER_BODY: Final = struct.Struct("<Q")
TRAILER_SIZE: Final = RECORD.size + TRAILER_BODY.size

SYNC_TAIL: Final = b"\x00\x00\xff\xff"
"""What every Z_SYNC_FLUSH ends with; stripped on write, put back on read (as WebSocket does)."""

# -- limits: what a reader accepts before it calls a file damaged -------------------------------
MAX_PAYLOAD: Final = 8 << 20
MAX_BODY: Final = 32 << 20
MAX_STR: Final = 256 << 10
MAX_SERIES: Final = 1 << 17
MAX_SLOTS: Final = 1 << 21
MAX_BOUNDS: Final = 4096
MAX_SCRAPES: Final = 1024
MAX_GPUS: Final = 256
MAX_EXP: Final = 30
MAX_INDEX: Final = 1 << 24
MAX_T_US: Final = 253_402_300_799_000_000
"""The latest time a poll, a scrape or an event may have (the last µs of year 9999: what a
date can print); the earliest is 1970."""
MIN_INTERVAL_S: Final = 0.001
MAX_INTERVAL_S: Final = 86_400.0
"""The poll intervals a header may state."""
COST_PER_BYTE: Final = 3_000
COST_ALLOWANCE: Final = 500_000_000
"""Decoding from a keyframe may cost (`decoder.COST_BODY` and the rest: work units of about a
nanosecond each on a slow core) at most this much per byte read, plus the allowance. The
polls of a busy server cost about 300 units a byte, an endpoint failing every other poll
about 650, the keyframe of a fleet about 1 600: deflate lets a crafted body cost a thousand times
more (a poll that redefines, moves or toggles every series, repeated), and past the budget
the polls are read no further, with one warning. So no file costs more than about three
seconds of decoding per megabyte, whatever it holds."""


class Damaged(ValueError):
    """Bytes that break the format: truncated, corrupted or hostile."""


def frame_record(kind: int, payload: bytes) -> bytes:
    """One record, ready for a single `write()`."""
    head = RECORD.pack(kind, len(payload), 0)[:5]
    crc = zlib.crc32(payload, zlib.crc32(head))
    return head + struct.pack("<I", crc) + payload


def record_crc(kind: int, length: int, payload: bytes | memoryview) -> int:
    return zlib.crc32(payload, zlib.crc32(RECORD.pack(kind, length, 0)[:5]))


# -- varints ------------------------------------------------------------------------------------


def put_uvarint(out: bytearray, value: int) -> None:
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def put_svarint(out: bytearray, value: int) -> None:
    put_uvarint(out, value << 1 if value >= 0 else (-value << 1) - 1)


def put_str(out: bytearray, text: str) -> None:
    data = text.encode("utf-8", errors="replace")
    put_uvarint(out, len(data))
    out += data


class Cursor:
    """Reads primitives from a body, raising `Damaged` instead of reading past its end."""

    __slots__ = ("data", "end", "pos")

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos
        self.end = len(data)

    def u8(self) -> int:
        if self.pos >= self.end:
            raise Damaged("body ends early")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def uvarint(self) -> int:
        data, pos, end = self.data, self.pos, self.end
        result = shift = 0
        for _ in range(10):
            if pos >= end:
                raise Damaged("body ends inside a number")
            b = data[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                self.pos = pos
                return result
            shift += 7
        raise Damaged("number longer than ten bytes")

    def svarint(self) -> int:
        u = self.uvarint()
        return (u >> 1) ^ -(u & 1)

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise Damaged("body ends inside a field")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def str(self) -> str:
        n = self.uvarint()
        if n > MAX_STR:
            raise Damaged(f"string of {n} bytes (limit {MAX_STR})")
        return self.take(n).decode("utf-8", errors="replace")

    def f64s(self, n: int) -> tuple[float, ...]:
        return struct.unpack(f"<{n}d", self.take(8 * n))
