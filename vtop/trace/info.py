"""What a trace holds, without replaying it: the lines `vtop trace info FILE` prints.

Reads the header, the index (or rebuilds it), and the totals (from the footer, or by decoding
every poll when the recording did not close cleanly), then describes them in one aligned block:
who wrote it from what, when, how long, the servers and GPUs, the configuration as recorded,
and what the format cost: bytes per poll and per sample. Everything taken from the file was
cleaned of control characters by the reader. The block fits its width (80 columns unless the
command line knows the terminal's), whatever the file says: the knob table's columns are as
wide as their cells (a knob name of 28 characters once pushed its row out of line), and a line
still too long continues under its own column. The command line around it (parsing, printing,
the exit code) is `vtop.cli.trace`.
"""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime
from typing import Any

from vtop import durations, untrusted
from vtop.trace.reader import TraceReader

WIDTH = 80
_KEEP = "\xa0"
"""Joins words no line break may part (`max_model_len 32768`); printed as a space."""
_HANG = 12
"""Where a continued line of the block starts: under the values, past `endpoint    `."""


def _when(t: float | None) -> str:
    if t is None:
        return "–"
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _text(v: Any, limit: int = 200) -> str:
    return untrusted.clean(str(v), limit)


def _fit(line: str, width: int, hang: int = _HANG) -> list[str]:
    """`line` in lines of at most `width` columns, broken at spaces (not at `_KEEP`), each
    continuation `hang` columns in."""
    if len(line) > width:
        pieces = textwrap.wrap(line, width, subsequent_indent=" " * hang, break_on_hyphens=False)
    else:
        pieces = [line]
    return [p.replace(_KEEP, " ") for p in pieces]


def _keep(text: str) -> str:
    return text.replace(" ", _KEEP)


def _knobs(knobs: dict[str, Any], width: int) -> list[str]:
    """The recorded configuration: name, value, where it came from, how; the columns as wide as
    their cells (a value longer than 12 characters pushes its own row only)."""
    rows = [
        (_text(name, 40), _text(value, 40), _text(prov, 10), _text(detail))
        for name, triple in sorted(knobs.items())[:40]
        if isinstance(triple, list) and len(triple) == 3
        for value, prov, detail in [triple]
    ]
    if not rows:
        return []
    name_w = min(max(len(r[0]) for r in rows), 32)
    value_w = max((len(r[1]) for r in rows if len(r[1]) <= 12), default=1)
    prov_w = max(len(r[2]) for r in rows)
    hang = 2 + name_w + 2 + value_w + 2 + prov_w + 2
    out = []
    for name, value, prov, detail in rows:
        line = f"  {name:<{name_w}}  {value:>{value_w}}  {prov:<{prov_w}}  {detail}"
        out.extend(_fit(line.rstrip(), width, hang if hang < width - 20 else _HANG))
    return out


def describe(reader: TraceReader, width: int = WIDTH) -> list[str]:
    """The lines `trace info` prints, none wider than `width`."""
    h = reader.header
    stats = reader.stats()
    out = [f"trace       {reader.name} (format {reader.format}, written by vtop {h.vtop or '?'})"]
    out.append(f"created     {h.created or '–'}")
    if h.sources:
        out.extend(_fit(f"sources     {', '.join(h.sources)}", width))
    start, end = stats.t_first, stats.t_last
    out.append(f"start       {_when(start)}")
    if start is not None and end is not None:
        every = (end - start) / (stats.polls - 1) if stats.polls > 1 else None
        cadence = f", every {every:.2f} s" if every else ""
        out.append(f"duration    {durations.hms(end - start)} ({stats.polls} polls{cadence})")
    else:
        out.append("duration    – (no polls)")
    for ep in h.endpoints:
        parts = [_text(ep.get("url", "?"))]
        if ep.get("vllm_version"):
            parts.append(f"vLLM {_text(ep['vllm_version'], 40)}")
        models = ep.get("models")
        if isinstance(models, list):
            parts.extend(_text(m) for m in models[:3])
        if ep.get("max_model_len"):
            parts.append(f"max_model_len {_text(ep['max_model_len'], 20)}")
        out.extend(_fit(f"endpoint    {'  '.join(_keep(p) for p in parts)}", width))
        knobs = ep.get("knobs")
        if isinstance(knobs, dict) and knobs:
            out.extend(_knobs(knobs, width))
    if h.gpus:
        out.extend(_fit(f"GPUs        {', '.join(h.gpus)}", width))
    per_poll = stats.bytes / stats.polls if stats.polls else 0.0
    per_sample = stats.bytes / stats.samples if stats.samples else 0.0
    out.append(
        f"samples     {stats.samples:,} ({stats.samples / max(stats.polls, 1):.0f} per poll)"
    )
    out.append(
        f"size        {_size(stats.bytes)}: {per_poll:.0f} bytes/poll, "
        f"{per_sample:.2f} bytes/sample"
    )
    if start is not None and end is not None and end > start:
        per_day = stats.bytes / (end - start) * 86400
        out.append(f"per day     {_size(per_day)} at this rate")
    index = (
        "footer (closed cleanly)"
        if reader.indexed
        else ("rebuilt by scanning (the recording did not close cleanly)")
    )
    out.append(f"index       {len(reader.keyframes)} keyframes, {index}")
    return out
