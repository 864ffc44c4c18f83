"""The replay's timeline: play state and speed, where we are, the trace as a bar with its marks.

One line, like the header: `▶ ×10  3:01 / 15:02  ━━━━━━●──◆─────◆──  n  WARN budget-too-small
5:01`. The bar is a fixed number of cells over the whole trace, so it changes only when the
position crosses into the next cell (every 15 s of a 15-minute trace on 60 cells) or a mark
arrives; the position text changes every frame but is a few cells wide. Marks are where
findings begin firing, coloured by severity; in training they only say "an incident", since
the colour would give the answer away.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from textual.content import Content

from vtop import durations
from vtop.model import Severity
from vtop.ui.widgets.fields import Field, FieldsWidget

GAP = 2
STATE_W = 9
NEXT_MIN_WIDTH = 100
"""Below this width the next-mark field gives its room to the bar."""
NEXT_W = 40
MARK_STYLES = {
    Severity.CRITICAL: "bold $error",
    Severity.WARNING: "bold $warning",
    Severity.INFO: "bold $primary",
    Severity.OK: "bold $primary",
}
HIDDEN_MARK = "bold $primary"


@dataclass(frozen=True, slots=True)
class Mark:
    t: float
    severity: Severity
    label: str


@dataclass(frozen=True, slots=True)
class TimelineState:
    """Everything the timeline shows; the app makes a new one when any of it changes."""

    start: float
    end: float
    position: float
    playing: bool
    speed: float
    at_end: bool = False
    marks: tuple[Mark, ...] = ()
    hidden: bool = False
    """Training: marks say neither severity nor rule."""
    note: str = ""
    """Right-hand text: the next mark, or what is still being computed."""


def bar(state: TimelineState, cells: int) -> Content:
    """The trace as `cells` cells: played, the cursor, to come, and the marks over them."""
    if cells <= 0:
        return Content("")
    span = state.end - state.start
    last = cells - 1

    def cell(t: float) -> int:
        if span <= 0:
            return last
        return max(0, min(last, math.floor((t - state.start) / span * cells)))

    here = cell(state.position)
    marked: dict[int, Severity] = {}
    for m in state.marks:
        c = cell(m.t)
        marked[c] = max(marked.get(c, Severity.OK), m.severity)
    runs: list[tuple[str, str]] = []
    for c in range(cells):
        if c in marked:
            text, style = "◆", HIDDEN_MARK if state.hidden else MARK_STYLES[marked[c]]
            if c == here:
                style += " reverse"
        elif c == here:
            text, style = "●", "bold $accent"
        elif c < here:
            text, style = "━", "$accent"
        else:
            text, style = "─", "$text-muted"
        if runs and runs[-1][1] == style:
            runs[-1] = (runs[-1][0] + text, style)
        else:
            runs.append((text, style))
    return Content.assemble(*runs)


def state_text(state: TimelineState) -> Content:
    if state.at_end:
        return Content.styled(f"■ end ×{state.speed:g}", "bold $text-muted")
    if state.playing:
        return Content.styled(f"▶ ×{state.speed:g}", "bold $success")
    return Content.styled(f"⏸ ×{state.speed:g}", "bold $warning")


class Timeline(FieldsWidget):
    """Position, duration, marks, speed and play state of a replay."""

    DEFAULT_CSS = """
    Timeline { height: 1; }
    """

    def __init__(self, *, id: str | None = "timeline") -> None:
        super().__init__(id=id)
        self.state: TimelineState | None = None

    def show(self, state: TimelineState) -> None:
        self.state = state
        self._place()
        self.put("state", state_text(state))
        span = durations.clock(state.end - state.start)
        where = f"{durations.clock(state.position - state.start)} / {span}"
        self.put("pos", Content.styled(where, "bold"))
        self.put("note", Content.styled(state.note, "$text-muted"))
        f = self._layout.get("bar")
        self.put("bar", bar(state, f.width if f is not None else 0))

    def on_resize(self) -> None:
        if self.state is not None:
            self.show(self.state)

    def _place(self) -> None:
        state = self.state
        width = self.size.width
        if state is None or width <= 0:
            return
        span = durations.clock(state.end - state.start)
        pos_w = len(f"{span} / {span}")
        layout = {"state": Field(0, 0, STATE_W), "pos": Field(0, STATE_W + GAP, pos_w)}
        x = STATE_W + GAP + pos_w + GAP
        note_w = min(NEXT_W, len(state.note)) if width >= NEXT_MIN_WIDTH and state.note else 0
        bar_w = width - x - (note_w + GAP if note_w else 0)
        if bar_w > 0:
            layout["bar"] = Field(0, x, bar_w)
        if note_w:
            layout["note"] = Field(0, width - note_w, note_w)
        self.place(layout)


def marks_of(pairs: Sequence[tuple[float, str]]) -> tuple[Mark, ...]:
    """Marks from `ReplaySource.marks`' (time, "SEVERITY rule") pairs."""
    out = []
    for t, label in pairs:
        level, _, rule = label.partition(" ")
        severity = Severity.__members__.get(level, Severity.WARNING)
        out.append(Mark(t, severity, rule or label))
    return tuple(out)
