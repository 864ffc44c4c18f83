"""A series of bucket values -> rows of block characters, as styled runs (no Textual here).

Eighth blocks give `height × 8` levels. Unknown buckets (no data: the server was away, or the
signal is missing) draw a dotted baseline, so a gap never looks like a zero. A known value,
zero included, always shows at least the lowest block, so "idle" is visible as a floor. A
restart is marked in the top row of its cell. Each row is returned as runs of one style class,
merged, so a chart line costs a handful of escape codes, not one per cell.
"""

from __future__ import annotations

from collections.abc import Sequence
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


def rows(values: Sequence[float | None], height: int, top: float,
         restarts: Sequence[int] = ()) -> list[list[Run]]:  # fmt: skip
    """`height` rows, top first, each a list of merged (text, style) runs."""
    lv = levels(values, height, top)
    marks = set(restarts)
    out: list[list[Run]] = []
    for r in range(height):
        base = (height - 1 - r) * 8  # eighths below this row
        runs: list[Run] = []
        for c, n in enumerate(lv):
            style: RunStyle
            if r == 0 and c in marks:
                ch, style = RESTART, "restart"
            elif n is None:
                ch, style = (GAP if r == height - 1 else " "), "gap"
            else:
                ch, style = BLOCKS[max(0, min(8, n - base))], "bar"
            if runs and runs[-1][1] == style:
                runs[-1] = (runs[-1][0] + ch, style)
            else:
                runs.append((ch, style))
        out.append(runs)
    return out
