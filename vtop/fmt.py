"""Numbers as vtop prints them, for its two readers: the screen and the report.

One module, so one decision holds everywhere: an unknown is `DASH` ("–"), never 0, on the
screen, in the report and in `vtop train`. The two readers want different shapes of the same
number, and the names say which is which:

- the screen (`num`, `pct`, `seconds`, `gib`, `interval`) cuts every value to three significant
  digits with k/M/G/T suffixes. Besides fitting 80 columns, that keeps the bytes sent to the
  terminal low: a widget is repainted only when its text changes, and a token rate printed as
  `1.23k` changes far less often than `1234.57`.
- the report (`report_num`, `report_seconds`, `knob`, `spark`, `clock`, `when`) writes
  a value in its unit with a space before it (`48.1%`, `42 ms`, `21.3 GiB`, `1,234`), so text,
  Markdown and HTML agree digit for digit.

Durations a user types or reads as prose live in `vtop.durations`; this module formats values.
What a figure is called, and which of these prints it, is `vtop.figures`' catalog.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from vtop.knobs import KnobValue, format_value

DASH = "–"
"""What unknown looks like: missing data is never drawn as 0."""

# -- the screen -------------------------------------------------------------------------------


def num(v: float | None, *, digits: int = 3) -> str:
    """`0`, `7`, `12.5`, `1.23k`, `45.6M`; integers below 1000 print as integers."""
    if v is None or not math.isfinite(v):
        return DASH
    if abs(v) < 1000:
        text = str(int(v)) if v == int(v) else _sig(v, digits)
        if abs(float(text)) < 1000:
            return text
    for scale, suffix in ((1e3, "k"), (1e6, "M"), (1e9, "G"), (1e12, "T")):
        text = _sig(v / scale, digits)
        if abs(float(text)) < 1000 or suffix == "T":
            return text + suffix
    raise AssertionError("unreachable")


def _sig(v: float, digits: int) -> str:
    """`v` rounded to `digits` significant digits, without trailing zeros."""
    if v == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(v))))
    text = f"{v:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def pct(ratio: float | None) -> str:
    """A 0..1 ratio as `84.1%` (`100%`, `0%`)."""
    if ratio is None or not math.isfinite(ratio):
        return DASH
    p = ratio * 100
    if p >= 99.95 or p == 0:
        return f"{p:.0f}%"
    return f"{p:.1f}%"


def seconds(v: float | None, *, digits: int = 3) -> str:
    """A latency: `0s`, `850µs`, `12ms`, `1.23s`, `2m05s` (none at all is `0s`, not `0µs`: a
    queue that empties is not a queue of under a microsecond)."""
    if v is None or not math.isfinite(v):
        return DASH
    if v == 0:
        return "0s"
    if v < 0.001:
        return f"{v * 1e6:.0f}µs"
    if v < 1:
        return f"{_sig(v * 1000, digits)}ms"
    if v < 60:
        return f"{_sig(v, digits)}s"
    m, s = divmod(round(v), 60)
    return f"{m}m{s:02d}s"


def gib(v: float | None) -> str:
    """Bytes as GiB with one decimal: `21.3`."""
    if v is None or not math.isfinite(v):
        return DASH
    return f"{v / 1024**3:.1f}"


def interval(v: float) -> str:
    """A poll interval: `1s`, `0.5s`, `10s`."""
    return f"{v:g}s"


# -- the report -------------------------------------------------------------------------------

_SPARK = "▁▂▃▄▅▆▇█"


def report_num(v: float | None, unit: str = "") -> str:
    """A value in its unit, compactly; None is "–"."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return DASH
    if unit == "ratio":
        return f"{v * 100:.1f}%"
    if unit == "seconds":
        return report_seconds(v)
    if unit == "bytes":
        return f"{v / 1024**3:.1f} GiB"
    if unit == "percent":
        return f"{v:.0f}%"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if v == int(v):
        return f"{v:.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    if abs(v) >= 1:
        return f"{v:.2f}".rstrip("0").rstrip(".")
    return f"{v:.3f}".rstrip("0").rstrip(".") or "0"


def report_seconds(v: float) -> str:
    """A latency in a report: `0 s`, `850 µs`, `42 ms`, `1.23 s`, `2.1 min`."""
    if v == 0:
        return "0 s"
    if v < 1:
        return f"{v * 1000:.0f} ms" if v >= 0.001 else f"{v * 1e6:.0f} µs"
    if v < 60:
        return f"{v:.2f} s"
    return f"{v / 60:.1f} min"


def knob(v: KnobValue) -> str:
    """A knob's value as the server takes it; unknown is "–"."""
    return DASH if v is None else format_value(v)


def _resample(values: Sequence[float | None], width: int) -> list[float | None]:
    """At most `width` points: consecutive groups averaged, gaps kept as None."""
    if len(values) <= width:
        return list(values)
    out: list[float | None] = []
    for i in range(width):
        group = values[i * len(values) // width : (i + 1) * len(values) // width]
        known = [v for v in group if v is not None]
        out.append(sum(known) / len(known) if known else None)
    return out


def spark(
    values: Sequence[float | None],
    width: int = 24,
    *,
    lo: float | None = None,
    hi: float | None = None,
) -> str:
    """Unicode sparkline; a gap is a space, a flat line sits at the bottom."""
    pts = _resample(values, width)
    known = [v for v in pts if v is not None]
    if not known:
        return ""
    low = min(known) if lo is None else lo
    high = max(known) if hi is None else hi
    low = min(low, 0.0) if lo is None and low >= 0 and high > 0 else low
    span = high - low
    chars = []
    for v in pts:
        if v is None:
            chars.append(" ")
        elif span <= 0:
            chars.append(_SPARK[0])
        else:
            level = int((v - low) / span * (len(_SPARK) - 1) + 0.5)
            chars.append(_SPARK[max(0, min(len(_SPARK) - 1, level))])
    return "".join(chars)


def clock(iso_text: str | None) -> str:
    """'2025-06-15T15:06:41Z' -> '15:06:41Z' (the date is in the window line)."""
    if not iso_text:
        return DASH
    return iso_text[11:] if len(iso_text) > 11 else iso_text


def when(iso_text: str | None) -> str:
    """'2025-06-15T15:06:41Z' -> '2025-06-15 15:06:41Z'."""
    return iso_text.replace("T", " ") if iso_text else DASH
