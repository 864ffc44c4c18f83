"""How the dashboard's rows are shared out at a terminal size (no Textual here).

The main screen never scrolls: what does not fit gives way in a fixed order, each step taken
only while the verdict would get fewer than `TRIAGE_MIN` rows, so that 80×24 with four
endpoints still shows the header, every endpoint's row, the verdict, every scheduler panel and
the GPU. The order, least important first (docs/tui.md says the same):

1. the GPU panel's notes (`read from the server's /metrics …`);
2. the GPU box: one line without a border (one GPU's readings, or all of them summed);
3. the scheduler panels go two to a row: label, value and a short chart (no note);
4. the verdict down to one line (its finding in one line: severity, rule, the change);
5. the endpoints' rows (the list then shows the rows around the chosen one).

The roomy layout (boxed panels in three columns) is used where the screen is wide enough and
the boxes fit under the rest. Everything is decided from the sizes, the number of endpoint
rows and of GPU lines, never from the verdict's text: a longer diagnosis must not flip the
layout from one poll to the next.

Across, a text with shorter forms shows the longest that fits its field (`fitting`): fewer
words rather than a word cut in half.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

GpuForm = Literal["box", "lines", "line"]
"""The GPU panel: its box with the notes, its box without them, one line without a box."""

ROOMY_MIN_W = 100
"""The narrowest screen for the grid of boxed panels (three columns of 32)."""
ROOMY_ROWS = 15
"""Rows the grid of boxed panels needs: three rows of boxes with a value, a chart and a note
(and the statistics from 18)."""
TALL_H = 34
"""From this height the verdict may take `TRIAGE_TALL` rows beside the boxed panels."""
TRIAGE_TALL, TRIAGE_SHORT = 10, 7
"""The verdict's most rows (border included) on tall and on short screens."""
TRIAGE_MIN = 5
"""Rows the verdict keeps before anything else gives way: three lines (a finding, its flags
and the line after)."""
TRIAGE_FLOOR = 3
"""The fewest: one line, a finding in one line."""
PANEL_ROWS = 9
"""The scheduler panels, one to a row (`vtop.ui.panels.PANELS`)."""
FLEET_FLOOR = 4
"""The endpoints' box at its smallest: border, header and the chosen endpoint's row."""


@dataclass(frozen=True, slots=True)
class Needs:
    """What the screen holds besides the verdict, in rows (borders included)."""

    width: int
    height: int
    fixed: int
    """The header, the footer, a replay's timeline."""
    fleet: int = 0
    """The endpoints' box (0: one endpoint, no box)."""
    gpus: int = 1
    """GPU lines (or the one line saying why none can be read)."""
    gpu_notes: int = 0
    """Note lines under them."""


@dataclass(frozen=True, slots=True)
class Plan:
    """How the rows are shared out."""

    compact: bool
    across: int
    """Compact scheduler panels to a row: 1, or 2 where rows are short."""
    gpu: GpuForm
    triage: int
    """The verdict's most rows, border included."""
    fleet: int
    """The endpoints' most rows, border included (0: no box)."""

    def rows(self, needs: Needs) -> int:
        """Rows the screen takes with the verdict at its most."""
        panels = ROOMY_ROWS if not self.compact else 2 + -(-PANEL_ROWS // self.across)
        return needs.fixed + self.fleet + self.triage + panels + gpu_rows(needs, self.gpu)


def fitting(forms: Sequence[str], width: int) -> str:
    """The first of `forms` (longest first) that fits in `width` cells; the last one, to be
    cut, when none does."""
    for form in forms:
        if len(form) <= width:
            return form
    return forms[-1] if forms else ""


def gpu_rows(needs: Needs, form: GpuForm) -> int:
    if form == "line":
        return 1
    return 2 + needs.gpus + (needs.gpu_notes if form == "box" else 0)


def plan(needs: Needs) -> Plan:
    """The layout for these needs: roomy where it fits, else compact with what gives way."""
    cap = TRIAGE_TALL if needs.height >= TALL_H else TRIAGE_SHORT
    if needs.width >= ROOMY_MIN_W:
        spare = needs.height - needs.fixed - needs.fleet - gpu_rows(needs, "box")
        if spare - TRIAGE_SHORT >= ROOMY_ROWS:
            return Plan(False, 1, "box", min(cap, spare - ROOMY_ROWS), needs.fleet)
    across, fleet = 1, needs.fleet
    gpu: GpuForm = "box"

    def left() -> int:
        panels = 2 + -(-PANEL_ROWS // across)
        return needs.height - needs.fixed - fleet - panels - gpu_rows(needs, gpu)

    if left() < TRIAGE_MIN and needs.gpu_notes:
        gpu = "lines"
    if left() < TRIAGE_MIN:
        gpu = "line"
    if left() < TRIAGE_MIN:
        across = 2
    if left() < TRIAGE_FLOOR and fleet:
        fleet = max(FLEET_FLOOR, fleet - (TRIAGE_FLOOR - left()))
    return Plan(True, across, gpu, max(TRIAGE_FLOOR, min(TRIAGE_TALL, left())), fleet)
