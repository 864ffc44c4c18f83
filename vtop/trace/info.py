"""`vtop trace info FILE`: what a trace holds, without replaying it.

Reads the header, the index (or rebuilds it), and the totals (from the footer, or by decoding
every poll when the recording did not close cleanly), then prints one aligned block: who wrote
it from what, when, how long, the servers and GPUs, the configuration as recorded, and what
the format cost: bytes per poll and per sample. Everything printed from the file was cleaned
of control characters by the reader.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from vtop import durations
from vtop.trace.metadata import clean
from vtop.trace.reader import TraceError, TraceReader
from vtop.usage import OneLineParser


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
    return clean(str(v), limit)


def describe(reader: TraceReader) -> list[str]:
    """The lines `trace info` prints."""
    h = reader.header
    stats = reader.stats()
    out = [f"trace       {reader.name} (format {reader.format}, written by vtop {h.vtop or '?'})"]
    out.append(f"created     {h.created or '–'}")
    if h.sources:
        out.append(f"sources     {', '.join(h.sources)}")
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
        out.append(f"endpoint    {'  '.join(parts)}")
        knobs = ep.get("knobs")
        if isinstance(knobs, dict) and knobs:
            for name, triple in sorted(knobs.items())[:40]:
                if isinstance(triple, list) and len(triple) == 3:
                    value, prov, detail = triple
                    out.append(
                        f"  {_text(name, 40):<26}{_text(value, 40):>10}  "
                        f"{_text(prov, 10):<9}{_text(detail)}".rstrip()
                    )
    if h.gpus:
        out.append(f"GPUs        {', '.join(h.gpus)}")
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


def build_parser() -> OneLineParser:
    """`vtop trace info FILE` (also what `vtop completion` completes)."""
    parser = OneLineParser(prog="vtop trace", description="Inspect recorded traces.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    info = sub.add_parser("info", help="header, duration, polls, samples and size of a trace")
    info.add_argument("file", metavar="FILE", help="a trace written by vtop --record")
    return parser


def main(argv: Sequence[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:  # the help names the commands (argparse would say "command")
        parser.print_help(sys.stderr)
        return 2
    try:
        with TraceReader(args.file) as reader:
            reader.check()  # damage behind a sound footer is said, not hidden by the totals
            lines = describe(reader)
    except TraceError as exc:
        print(f"vtop: {exc}", file=sys.stderr)
        return 3
    write_stdout("\n".join(lines) + "\n")
    return 0


def write_stdout(text: str) -> None:
    """Print, and end quietly when the reader went away (`vtop trace info F | head`, or the
    terminal hung up: EIO)."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as exc:
        if not isinstance(exc, BrokenPipeError) and exc.errno != errno.EIO:
            raise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
