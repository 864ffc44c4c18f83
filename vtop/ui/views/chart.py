"""A series of bucket values -> rows of block characters, as styled runs (no Textual here).

Eighth blocks give `height × 8` levels. Unknown buckets (no data: the server was away, or the
signal is missing) draw a dotted baseline, so a gap never looks like a zero. A known value,
zero included, always shows at least the lowest block, so "idle" is visible as a floor. A
restart is marked in the top row of its cell. Each row is returned as runs of one style class,
merged, so a chart line costs a handful of escape codes, not one per cell.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from itertools import groupby
from typing import Literal

BLOCKS = " ▁▂▃▄▅▆▇█"
GAP = "·"
RESTART = "↻"

RunStyle = Literal["bar", "gap", "restart", "cap"]
Run = tuple[str, RunStyle]


def scale_max(values: Sequence[float | None], floor: float | None = None) -> float:
    """The top of the chart: the largest value seen (at least `floor`, and never 0)."""
    known = [v for v in values if v is not None]
    top = max(known, default=0.0)
    if floor is not None:
        top = max(top, floor)
    return top if top > 0 else 1.0


def levels(values: Sequence[float | None], height: int, top: float) -> list[int | None]:
    """Each value in eighths of a cell (1 .. height*8), None for unknown."""
    full = height * 8
    out: list[int | None] = []
    for v in values:
        if v is None:
            out.append(None)
        else:
            out.append(max(1, min(full, round(max(0.0, v) / top * full))))
    return out


@lru_cache(maxsize=1024)
def _column(n: int | None, height: int) -> str:
    """One cell top row first: blocks for `n` eighths, or the dotted baseline when unknown."""
    if n is None:
        return " " * (height - 1) + GAP
    return "".join(BLOCKS[max(0, min(8, n - (height - 1 - r) * 8))] for r in range(height))


def _spans(kinds: Sequence[RunStyle]) -> list[tuple[int, int, RunStyle]]:
    """(start, end, style) of each run of cells of one style."""
    out: list[tuple[int, int, RunStyle]] = []
    at = 0
    for style, cells in groupby(kinds):
        end = at + sum(1 for _ in cells)
        out.append((at, end, style))
        at = end
    return out


def rows(
    values: Sequence[float | None], height: int, top: float, restarts: Sequence[int] = ()
) -> list[list[Run]]:
    """`height` rows, top first, each a list of merged (text, style) runs.

    Built a cell column at a time (each cached: a chart has at most `height × 8` kinds of
    cell) and cut into runs once per row: a chart redraws whole whenever a bucket completes."""
    lv = levels(values, height, top)
    if not lv:
        return [[] for _ in range(height)]
    lines = ["".join(row) for row in zip(*(_column(n, height) for n in lv), strict=True)]
    kinds: list[RunStyle] = ["gap" if n is None else "bar" for n in lv]
    spans = _spans(kinds)
    out = [[(line[a:b], style) for a, b, style in spans] for line in lines]
    marks = {c for c in restarts if 0 <= c < len(lv)}
    if marks:  # the top row marks each restart in its cell
        first = "".join(RESTART if c in marks else ch for c, ch in enumerate(lines[0]))
        top_kinds: list[RunStyle] = ["restart" if c in marks else k for c, k in enumerate(kinds)]
        out[0] = [(first[a:b], style) for a, b, style in _spans(top_kinds)]
    return out
