"""Number formatting for the screen: short, fixed-precision, and "–" for unknown.

Every value is cut to three significant digits. Besides fitting 80 columns, that is what keeps
the bytes sent to the terminal low: a widget is repainted only when its text changes, and a
token rate printed as `1.23k` changes far less often than `1234.57`.
"""

from __future__ import annotations

import math

DASH = "–"
"""What unknown looks like: missing data is never drawn as 0."""


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
    """A latency: `850µs`, `12ms`, `1.23s`, `2m05s`."""
    if v is None or not math.isfinite(v):
        return DASH
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
