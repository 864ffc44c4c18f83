"""Numbers, durations and sparklines as every report format writes them.

One place decides that a KV usage of 0.4812 reads "48.1%", a TTFT of 0.0423 s reads "42 ms" and
an unknown reads "–", so text, Markdown and HTML agree digit for digit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from vtop.model import KnobValue, format_value

MISSING = "–"
BLOCKS = "▁▂▃▄▅▆▇█"

LABELS = {
    "running": "running",
    "waiting": "waiting",
    "kv_usage": "KV cache usage",
    "preemptions_per_s": "preemptions/s",
    "generation_tokens_per_s": "generation tokens/s",
    "prompt_tokens_per_s": "prompt tokens/s",
    "requests_per_s": "requests finished/s",
    "ttft": "time to first token",
    "itl": "inter-token latency",
    "e2e": "end-to-end latency",
    "queue_time": "queue time",
    "ttft_p90": "TTFT p90",
}


def num(v: float | None, unit: str = "") -> str:
    """A value in its unit, compactly; None is "–"."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return MISSING
    if unit == "ratio":
        return f"{v * 100:.1f}%"
    if unit == "seconds":
        return seconds(v)
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


def seconds(v: float) -> str:
    if v == 0:
        return "0 s"
    if v < 1:
        return f"{v * 1000:.0f} ms" if v >= 0.001 else f"{v * 1e6:.0f} µs"
    if v < 60:
        return f"{v:.2f} s"
    return f"{v / 60:.1f} min"


def knob(v: KnobValue) -> str:
    return MISSING if v is None else format_value(v)


def resample(values: Sequence[float | None], width: int) -> list[float | None]:
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
    pts = resample(values, width)
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
            chars.append(BLOCKS[0])
        else:
            level = int((v - low) / span * (len(BLOCKS) - 1) + 0.5)
            chars.append(BLOCKS[max(0, min(len(BLOCKS) - 1, level))])
    return "".join(chars)


def clock(iso_text: str | None) -> str:
    """'2025-06-15T15:06:41Z' -> '15:06:41Z' (the date is in the window line)."""
    if not iso_text:
        return MISSING
    return iso_text[11:] if len(iso_text) > 11 else iso_text


def when(iso_text: str | None) -> str:
    """'2025-06-15T15:06:41Z' -> '2025-06-15 15:06:41Z'."""
    return iso_text.replace("T", " ") if iso_text else MISSING
