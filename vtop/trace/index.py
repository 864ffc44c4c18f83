"""The footer's index, believed only once every field in it holds.

A trace that closed cleanly ends with an index record (each keyframe's time, offset and poll
number, then the totals as JSON) and a trailer that points at it, so opening a day-long trace
costs that record, not the file. The file may come from anyone: an index that says the
impossible (a keyframe outside the polls or out of order, a count that is no count, a span
that does not match its polls) is refused with what it got wrong, and the reader rebuilds the
index by walking the records instead. Apart from the reader because it is pure: the record's
bytes in, an `Index` or the reason out, no file and no state.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from typing import TypeGuard

from vtop import untrusted
from vtop.trace import wire


@dataclass(frozen=True, slots=True)
class Keyframe:
    t: float
    offset: int
    poll: int


@dataclass(slots=True)
class TraceStats:
    polls: int
    samples: int
    t_first: float | None
    t_last: float | None
    bytes: int


@dataclass(frozen=True, slots=True)
class Index:
    """What a sound index says: where each keyframe is, the totals, and the last poll's time."""

    keyframes: list[Keyframe]
    totals: TraceStats
    end: float | None
    """The footer holds the recorded float; frames decode from whole microseconds, so the end
    is that microsecond, or `frames(t, reader.end)` would miss the last poll."""


def read_index(payload: bytes, *, index_at: int, data_start: int, size: int) -> Index | str:
    """The index record at `index_at` of a file of `size` bytes whose polls start at
    `data_start`; or, where a field does not hold, what is wrong ("lists 3 keyframes for 2
    polls"), to follow "its index" in a warning."""
    if len(payload) < 4:
        return "is too short"
    (n,) = struct.unpack_from("<I", payload, 0)
    if n > wire.MAX_INDEX or 4 + n * wire.INDEX_ENTRY.size > len(payload):
        return f"lists {n} keyframes, more than it holds"
    entries = [
        wire.INDEX_ENTRY.unpack_from(payload, 4 + i * wire.INDEX_ENTRY.size) for i in range(n)
    ]
    try:
        summary = json.loads(payload[4 + n * wire.INDEX_ENTRY.size :])
    except (ValueError, RecursionError):
        return "has unreadable totals"
    if not isinstance(summary, dict):
        return "has totals that are not a JSON object"
    polls, samples = summary.get("polls"), summary.get("samples")
    for name, count in (("polls", polls), ("samples", samples)):
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            return f"says {name} is {shown(count)}, not a count"
    assert isinstance(polls, int) and isinstance(samples, int)
    if polls < n:
        return f"lists {n} keyframes for {polls} polls"
    times = {}
    for name in ("t_first", "t_last"):
        t = summary.get(name)
        if t is not None and not is_time(t):
            return f"says {name} is {shown(t)}, not a time"
        times[name] = None if t is None else float(t)
    t_first, t_last = times["t_first"], times["t_last"]
    if (t_first is None) != (t_last is None) or (t_first is None) != (polls == 0):
        return "has a span that does not match its polls"
    if t_first is not None and t_last is not None and t_first > t_last:
        return "says the last poll comes before the first"
    if polls and not entries:
        return f"lists no keyframe for {polls} polls"
    last_offset, last_poll = data_start - 1, -1
    for t_us, offset, poll in entries:
        if not last_offset < offset < index_at:
            return f"puts a keyframe at byte {offset}, outside the polls"
        if not last_poll < poll < polls:
            return f"numbers a keyframe {poll}, out of order"
        if not 0 <= t_us <= wire.MAX_T_US:
            return "has a keyframe time out of range"
        last_offset, last_poll = offset, poll
    # The writer's first poll is a keyframe, right after the header: the trace's start.
    if entries:
        t_us, offset, poll = entries[0]
        if (offset, poll) != (data_start, 0) or t_first is None or t_us != round(t_first * 1e6):
            return "has a first keyframe that is not the first poll"
    return Index(
        [Keyframe(t / 1e6, off, poll) for t, off, poll in entries],
        TraceStats(polls, samples, t_first, t_last, size),
        round(t_last * 1e6) / 1e6 if t_last is not None else None,
    )


def is_time(v: object) -> TypeGuard[int | float]:
    """A number that can be a poll's time: finite, between 1970 and year 9999."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return False
    return 0 <= v <= wire.MAX_T_US / 1e6


def shown(v: object) -> str:
    """A value from the file, as an error line may quote it: short, one line, printable."""
    return untrusted.clean(
        json.dumps(v) if isinstance(v, float) and not math.isfinite(v) else repr(v), 40
    )
