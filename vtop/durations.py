"""Durations and times as users write them and as vtop prints them: one grammar everywhere.

Why one module: `--duration`, `--backfill`, a rule's `for:` and `window:`, a rule test's
`eval_time` and the replay's `--from`/`--to` are all typed by the same people, so they accept
the same text — a number of seconds (`90`, `0.5`) or amounts with units run together (`250ms`,
`90s`, `5m`, `1h30m`, `1d`) — and reject anything else with the same one-line error. What is
printed has several shapes, each for its reader, all here so that none is written twice:

- `exact`: the shortest text `parse` reads back to the same value (`2m`, `90s`, `1h30m`,
  `500ms`): PromQL durations, the window a key selects, a rule's `for`.
- `span`: a report's prose (`12 s`, `5m 03s`, `2h 04m`, `1d 02h`).
- `compact`: the screen's uptimes and ages, at most two units (`45s`, `12m`, `3h12m`, `2d4h`).
- `hms`: a trace's length to the second (`2m 03s`, `1h 02m 03s`).
- `clock`: an offset into a replay (`3:01`, `1:02:03`).

A time (`--from`, `--to`, the replay's "go to") is relative to a trace (`+5m` after its start,
`-10m` before its end), a time of day (`15:04[:05]`, 00:00 to 23:59:59) or ISO-8601 (UTC unless
it says otherwise): `parse_time`. A time of day is on the trace's first day, or on the first
later day on which the trace holds it (`00:30` on a trace that runs past midnight), never on a
day after the trace: `--from 15:08` on a trace that starts at 15:08:11 is before its start.
`window` reads `--from`/`--to` together and clips them to the trace, so a window wider than the
trace is the trace (`--from=-99999999d` is its start), never a span it does not cover.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta

UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_PROMQL = re.compile(r"(\d+(ms|s|m|h|d|w|y))+")
_PROMQL_PART = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")
EXAMPLES = "30s, 5m, 1h30m"


def parse(text: str) -> float:
    """'90', '90s', '5m', '1h30m', '250ms', '1d' -> seconds; ValueError names the bad text."""
    t = text.strip().lower()
    try:
        value = float(t)
    except ValueError:
        pass
    else:
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{text!r} is not a duration (try {EXAMPLES})")
        return value
    pos, total = 0, 0.0
    for m in _PART.finditer(t):
        if m.start() != pos:
            break
        total += float(m.group(1)) * UNITS[m.group(2)]
        pos = m.end()
    if pos != len(t) or not t or not math.isfinite(total):
        raise ValueError(f"{text!r} is not a duration (try {EXAMPLES})")
    return total


def is_promql(text: str) -> bool:
    """Whether Prometheus reads `text` as a duration (whole amounts with units: `15s`, `1m30s`)."""
    return _PROMQL.fullmatch(text) is not None


def promql_seconds(text: str) -> float:
    """Seconds of a duration as Prometheus reads it (`1w`, `1h30m`); ValueError if it is not
    one. Prometheus's year is 365 days, its week 7; too many digits are infinitely long."""
    if not is_promql(text):
        raise ValueError(f"{text!r} is not a duration like 15s or 1m")
    units = UNITS | {"w": 7 * 86400.0, "y": 365 * 86400.0}
    return sum(float(m.group(1)) * units[m.group(2)] for m in _PROMQL_PART.finditer(text))


def exact(seconds: float) -> str:
    """The shortest text that reads back as `seconds`, to the millisecond: 120 -> 2m, 90 ->
    90s, 5400 -> 90m, 3600 -> 1h, 0.5 -> 500ms."""
    ms = round(seconds * 1000)
    for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def span(seconds: float) -> str:
    """A report's length of time: 12 s, 5m 03s, 2h 04m, 1d 02h."""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{s // 86400}d {s % 86400 // 3600:02d}h"


def compact(seconds: float | None, missing: str = "–") -> str:
    """An uptime or an age on screen: 45s, 12m, 3h12m, 2d4h (never more than two units)."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return missing
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h{m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d{h}h"


def hms(seconds: float) -> str:
    """A length to the second: 2m 03s, 1h 02m 03s."""
    s = round(seconds)
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}h {m:02d}m {sec:02d}s" if h else f"{m}m {sec:02d}s"


def clock(seconds: float) -> str:
    """An offset into a trace: 3:01, 1:02:03."""
    s = max(0, math.floor(seconds + 1e-6))
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


def parse_time(text: str, start: float | None, end: float | None) -> float:
    """A time in a trace spanning [start, end]: +5m, -10m, a bare duration after the start,
    15:04[:05] on the start's day (or the first later day the trace reaches it on), or
    ISO-8601. The time may lie outside the trace (`window` clips it)."""
    t = text.strip()
    if t[:1] in "+-" and start is not None and end is not None:
        offset = parse(t[1:])
        return start + offset if t[0] == "+" else end - offset
    try:
        offset = parse(t)
    except ValueError:
        pass
    else:
        return start + offset if start is not None else offset
    m = re.fullmatch(r"(\d{1,2}):(\d{2})(?::(\d{2}(?:\.\d+)?))?", t)
    if m and start is not None:
        hours, minutes, seconds = int(m.group(1)), int(m.group(2)), float(m.group(3) or 0)
        if hours > 23 or minutes > 59 or seconds >= 60:
            raise ValueError(f"{text!r} is not a time of day (00:00 to 23:59:59)")
        day = datetime.fromtimestamp(start, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        value = (day + timedelta(hours=hours, minutes=minutes, seconds=seconds)).timestamp()
        if value < start - 1 and end is not None:
            later = value + 86400.0 * math.ceil((start - 1 - value) / 86400.0)
            if later <= end:  # the trace reaches that time on a later day
                return later
        return value
    try:
        stamp = datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"{text!r} is not a time (try +5m, -10m, 15:04 or 2025-06-15T15:04:00Z)"
        ) from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return stamp.timestamp()


def window(
    since: str | None, until: str | None, start: float | None, end: float | None
) -> tuple[float | None, float | None]:
    """`--from since --to until` over a trace spanning [start, end], clipped to it: a bound
    outside the trace is the trace's own (None where not given). ValueError, one line naming the
    flag, for a time it cannot read, `--to` before `--from`, or a window the trace is not in."""
    lo = _flag_time("--from", since, start, end)
    hi = _flag_time("--to", until, start, end)
    if lo is not None and hi is not None and hi < lo:
        raise ValueError("--to is before --from")
    if start is not None and end is not None:
        if lo is not None and lo > end:
            raise ValueError(f"--from {since} is after the trace ends ({_stamp(end)})")
        if hi is not None and hi < start:
            raise ValueError(f"--to {until} is before the trace starts ({_stamp(start)})")
    if lo is not None and start is not None:
        lo = max(lo, start)
    if hi is not None and end is not None:
        hi = min(hi, end)
    return lo, hi


def _flag_time(flag: str, text: str | None, start: float | None, end: float | None) -> float | None:
    if not text:
        return None
    try:
        return parse_time(text, start, end)
    except ValueError as exc:
        raise ValueError(f"{flag}: {exc}") from None


def _stamp(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%SZ")
