"""`vtop trace list`: the traces there are to replay, as a table that fits its width.

A newcomer who installed the wheel has no `traces/` folder to look in: this lists the traces
vtop ships (`vtop.cli.shipped_traces`, by the names `--replay` takes) and then any in the current
folder's `traces/` (by the relative path, which `--replay` takes as it is), each with its
length, its servers, their vLLM version and what it shows. What it shows is the header's
`description` where a recording has one, else the title of the simulator scenario it was
recorded from (`vtop.sim.scenarios`: the trace package may not import the simulator, this
layer may), else where it was recorded from. The last column wraps rather than overflow.
A trace that cannot be read is still a row, saying why, so one damaged file hides no other.
"""

from __future__ import annotations

import os
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

from vtop import durations, untrusted
from vtop.cli import shipped_traces as shipped
from vtop.sim.scenarios import SCENARIOS
from vtop.trace.reader import Header, TraceError, TraceReader

WIDTH = 80
HEADINGS = ("NAME", "LENGTH", "SERVERS", "VLLM", "WHAT IT SHOWS")
_DEMO = re.compile(r"demo (\S+)")


@dataclass(frozen=True, slots=True)
class Listed:
    """One row: `name` is what `vtop --replay` takes for it."""

    name: str
    length: str
    servers: str
    vllm: str
    shows: str

    def cells(self) -> tuple[str, str, str, str, str]:
        return (self.name, self.length, self.servers, self.vllm, self.shows)


def shows(h: Header) -> str:
    """What a trace shows, in one line (see the module's docstring for where it comes from)."""
    described = h.raw.get("description")
    if isinstance(described, str) and described.strip():
        return untrusted.clean(described, 200)
    for source in h.sources:
        m = _DEMO.match(source)
        if m and m[1] in SCENARIOS:
            return SCENARIOS[m[1]].title
        if m:
            return f"the simulator's scenario {m[1]}"
    if h.sources:
        return "recorded live from " + ", ".join(s.removeprefix("live ") for s in h.sources)
    return "–"


def entry(name: str, path: Path) -> Listed:
    """The row of the trace at `path`, listed as `name`."""
    try:
        with TraceReader(path) as reader:
            h = reader.header
            stats = reader.stats()
    except TraceError as exc:
        return Listed(name, "–", "–", "–", f"cannot be read: {exc}")
    start, end = stats.t_first, stats.t_last
    length = durations.hms(end - start) if start is not None and end is not None else "–"
    versions = dict.fromkeys(
        untrusted.clean(ep["vllm_version"], 20) for ep in h.endpoints if ep.get("vllm_version")
    )
    return Listed(name, length, str(len(h.endpoints)), ", ".join(versions) or "–", shows(h))


def entries(cwd: Path) -> list[Listed]:
    """The shipped traces, then those in `cwd`'s traces/ (unless that is the shipped folder:
    a checkout's)."""
    rows = [entry(name, path) for name, path in shipped.shipped().items()]
    local = cwd / "traces"
    if local.is_dir() and not _same(local, shipped.shipped_dir()):
        rows += [
            entry(untrusted.clean(os.path.join("traces", p.name), 200), p)
            for p in shipped.shipped(local).values()
        ]
    return rows


def _same(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:
        return False


def table(rows: list[Listed], width: int = WIDTH) -> list[str]:
    """The rows under their headings, columns as wide as their widest cell, the last one
    wrapped into what the others leave of `width` (at least 24 columns)."""
    cells = [HEADINGS, *(r.cells() for r in rows)]
    widths = [max(len(c[i]) for c in cells) for i in range(len(HEADINGS) - 1)]
    left = sum(widths) + 2 * len(widths)
    room = max(width - left, 24)
    out = []
    for row in cells:
        lead = "  ".join(
            c.rjust(w) if i in (1, 2) else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=False))
        )
        lines = textwrap.wrap(row[-1], room, break_on_hyphens=False) or [""]
        out.append(f"{lead}  {lines[0]}".rstrip())
        out.extend(" " * left + more for more in lines[1:])
    return out
