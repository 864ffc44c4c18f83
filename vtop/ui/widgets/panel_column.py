"""A column of scheduler panels: value now, chart over the window, window statistics.

Textual re-renders every widget that overlaps a refresh (a quarter of a millisecond each, on
every poll), and it rewrites a changed line from the left edge of the widget that draws it.
Nine panel widgets cost more CPU than the rest of the screen; one widget for all nine would
rewrite whole screen lines for a value at the right. A column of panels is the balance: three
widgets, and a changed value rewrites its own panel's line only. Each panel is a set of
fields of this `FieldsWidget`, so a new value repaints its own cells.

Two layouts: roomy, a stack of bordered boxes whose charts fill them (more rows on taller
terminals, more buckets, so more history at the same bucket size, on wider ones); compact,
one row per panel (label, value, chart, note[, statistics]). The value is recomputed every
poll; the chart, the note and the statistics only when a bucket completes (or the window,
the size or the endpoint changes), and a chart row is repainted only if it changed. A cursor
(arrows, a click) selects the panel that `e` explains.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual import events
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.geometry import Size
from textual.message import Message

from vtop.model import Severity
from vtop.ui import chart, panels, trend
from vtop.ui.panels import PanelSpec, Trend, View
from vtop.ui.room import fitting
from vtop.ui.widgets.fields import Field, FieldsWidget

CHART_STYLES: dict[chart.RunStyle, str] = {
    "bar": "$primary",
    "gap": "$text-disabled",
    "restart": "bold $warning",
    "cap": "$text-muted",
}
VALUE_STYLES = {Severity.WARNING: "bold $warning", Severity.CRITICAL: "bold reverse $error"}
LABEL_W, VALUE_W, NOTE_W, STATS_W = 9, 21, 26, 34
"""A compact row's columns: `KV cache`, `p50 39.1ms p99 28.7ms` (the widest value), a note
with its shorter forms at 26 (`panels.Summary`), the statistics from 140 columns."""
GAP = 1
"""Between a compact row's value and its chart: a value as wide as its column never runs
into the bars."""
ACROSS_GAP = 2
"""Between the two panels of a compact row when they go two across."""


@dataclass(slots=True)
class Box:
    """Where one panel is drawn: its outer box (roomy) or its row (compact)."""

    x: int
    y: int
    width: int
    height: int
    chart_x: int
    chart_width: int
    chart_rows: int


@dataclass(slots=True)
class PanelState:
    spec: PanelSpec
    box: Box | None = None
    trend: Trend | None = None
    level: Severity = Severity.OK
    chart_key: tuple[object, ...] | None = None


class PanelColumn(FieldsWidget, can_focus=True):
    """Some scheduler panels, stacked."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "move(-1)", "Up", show=False),
        Binding("down,j", "move(1)", "Down", show=False),
        Binding("left,h", "side(-1)", "Left", show=False),
        Binding("right,l", "side(1)", "Right", show=False),
    ]

    DEFAULT_CSS = """
    PanelColumn { height: 1fr; width: 1fr; }
    """

    class Side(Message):
        """Left/right at a column's edge: the grid moves focus to the neighbour column."""

        def __init__(self, column: PanelColumn, step: int) -> None:
            super().__init__()
            self.column = column
            self.step = step

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.panels: dict[str, PanelState] = {}
        self.order: list[str] = []
        self.cursor = 0
        self._view: View | None = None
        self._compact = False
        self._across = 1
        """Compact panels per row: two where the screen is short of rows (`vtop.ui.room`)."""
        self._focused = False
        """The column has the focus: its cursor's panel is drawn active."""

    def hold(self, specs: list[PanelSpec], *, compact: bool, across: int = 1) -> None:
        """The panels this column draws, and in which layout (`across`: compact panels per
        row, label, value and chart only when two)."""
        ids = [s.id for s in specs]
        across = across if compact else 1
        if ids == self.order and compact == self._compact and across == self._across:
            return
        self._across = across
        self.panels = {s.id: self.panels.get(s.id) or PanelState(s) for s in specs}
        for state in self.panels.values():
            state.chart_key = None
        self.order = ids
        self.cursor = min(self.cursor, max(0, len(ids) - 1))
        self._compact = compact
        self.refresh(layout=True)
        self._arrange()
        if self._view is not None:
            self.show(self._view, force=True)

    # -- what tests and the app read ----------------------------------------------------------

    @property
    def selected(self) -> PanelSpec | None:
        return self.panels[self.order[self.cursor]].spec if self.order else None

    def select(self, pid: str) -> None:
        self._move_to(self.order.index(pid))

    def holds(self, pid: str) -> bool:
        return pid in self.panels

    def value(self, pid: str) -> str:
        return self.text(f"{pid}.value")

    def note(self, pid: str) -> str:
        return self.text(f"{pid}.note")

    def stats(self, pid: str) -> str:
        return self.text(f"{pid}.stats")

    def trend(self, pid: str) -> Trend | None:
        return self.panels[pid].trend

    def level(self, pid: str) -> Severity:
        return self.panels[pid].level

    @property
    def compact(self) -> bool:
        return self._compact

    @property
    def across(self) -> int:
        return self._across

    # -- layout ---------------------------------------------------------------------------------

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        if self._compact:
            return -(-len(self.order) // self._across)
        return container.height

    def on_resize(self) -> None:
        self._arrange()
        if self._view is not None:
            self.show(self._view, force=True)

    def _arrange(self) -> None:
        w, h = self.size
        if w <= 0 or h <= 0 or not self.order:
            self.place({})
            return
        layout: dict[str, Field] = {}
        if self._compact and self._across > 1:
            cell_w = (w - ACROSS_GAP * (self._across - 1)) // self._across
            for i, pid in enumerate(self.order):
                y, col = divmod(i, self._across)
                self._compact_cell(pid, y, col * (cell_w + ACROSS_GAP), cell_w, layout)
        elif self._compact:
            for i, pid in enumerate(self.order):
                self._compact_row(pid, i, w, layout)
        else:
            rows = len(self.order)
            row_h = h // rows
            for i, pid in enumerate(self.order):
                y = i * row_h
                self._box(pid, 0, y, w, row_h if i < rows - 1 else h - y, layout)
        self.place(layout)
        self._draw_frames()

    def _compact_row(self, pid: str, y: int, w: int, layout: dict[str, Field]) -> None:
        """Label, value, chart, note (and the statistics from 140 columns): the chart takes
        what the others leave."""
        stats_w = STATS_W if w >= 140 else 0
        fixed = LABEL_W + VALUE_W + GAP
        note_w = 36 if stats_w else (NOTE_W if w >= 70 else max(0, w - fixed - 12))
        chart_w = max(1, w - fixed - note_w - stats_w - (2 if stats_w else 1))
        layout[f"{pid}.label"] = Field(y, 0, LABEL_W)
        layout[f"{pid}.value"] = Field(y, LABEL_W, VALUE_W)
        layout[f"{pid}.chart0"] = Field(y, fixed, chart_w)
        x = fixed + chart_w + 1
        if note_w:
            layout[f"{pid}.note"] = Field(y, x, note_w)
        if stats_w:
            layout[f"{pid}.stats"] = Field(y, x + note_w + 1, stats_w)
        self.panels[pid].box = Box(0, y, w, 1, fixed, chart_w, 1)

    def _compact_cell(self, pid: str, y: int, x: int, w: int, layout: dict[str, Field]) -> None:
        """Two across: label, value and a short chart; the note and statistics are left out
        (the detail and `e` still have them)."""
        fixed = LABEL_W + VALUE_W + GAP
        chart_w = max(0, w - fixed)
        layout[f"{pid}.label"] = Field(y, x, LABEL_W)
        layout[f"{pid}.value"] = Field(y, x + LABEL_W, VALUE_W)
        if chart_w:
            layout[f"{pid}.chart0"] = Field(y, x + fixed, chart_w)
        self.panels[pid].box = Box(x, y, w, 1, x + fixed, max(1, chart_w), 1)

    def _box(self, pid: str, x: int, y: int, bw: int, bh: int, layout: dict[str, Field]) -> None:
        iw, ih = max(1, bw - 4), max(1, bh - 2)
        layout[f"{pid}.top"] = Field(y, x, bw)
        layout[f"{pid}.bottom"] = Field(y + bh - 1, x, bw)
        for i in range(ih):
            layout[f"{pid}.l{i}"] = Field(y + 1 + i, x, 2)
            layout[f"{pid}.r{i}"] = Field(y + 1 + i, x + bw - 2, 2)
        # The value is the field that changes every poll, and a changed line is rewritten
        # from the widget's edge to the end of the change: keep it narrow.
        layout[f"{pid}.value"] = Field(y + 1, x + 2, min(iw, VALUE_W + 3))
        # Value, chart, note, statistics; a box of three inner rows (a short roomy screen,
        # 100×30) leaves the statistics out, never drawing the note over the chart.
        rows = max(1, ih - 1 - (ih >= 3) - (ih >= 4))
        for r in range(rows):
            layout[f"{pid}.chart{r}"] = Field(y + 2 + r, x + 2, iw)
        if ih >= 3:
            layout[f"{pid}.note"] = Field(y + 2 + rows, x + 2, iw)
        if ih >= 4:
            layout[f"{pid}.stats"] = Field(y + ih, x + 2, iw)
        self.panels[pid].box = Box(x, y, bw, bh, x + 2, iw, rows)

    def _draw_frames(self) -> None:
        for i, pid in enumerate(self.order):
            self._frame(pid, i == self.cursor and self._focused)

    def _frame(self, pid: str, active: bool) -> None:
        state = self.panels[pid]
        box = state.box
        if box is None:
            return
        if self._compact:
            style = "bold $accent" if active else "$text-muted"
            self.put(f"{pid}.label", Content.styled(state.spec.short, style))
            return
        line = "$border" if active else "$border-blurred"
        title = "$accent" if active else "$text-muted"
        name = f" {state.spec.title} "
        fill = max(0, box.width - 3 - len(name))
        self.put(
            f"{pid}.top", Content.assemble(("╭─", line), (name, title), ("─" * fill + "╮", line))
        )
        self.put(f"{pid}.bottom", Content.styled("╰" + "─" * (box.width - 2) + "╯", line))
        for i in range(box.height - 2):
            self.put(f"{pid}.l{i}", Content.styled("│ ", line))
            self.put(f"{pid}.r{i}", Content.styled(" │", line))

    # -- data -----------------------------------------------------------------------------------

    def show(self, view: View, *, force: bool = False) -> None:
        """New data (or window, or endpoint): update what changed."""
        self._view = view
        with self.repaint_once():
            for pid in self.order:
                state = self.panels[pid]
                reading = panels.read(state.spec, view)
                value = reading.value
                if state.spec.unit and not value.startswith("–"):
                    value = f"{value} {state.spec.unit}"
                style = VALUE_STYLES.get(reading.level, "bold")
                self.put(f"{pid}.value", Content.styled(value, style))
                state.level = reading.level
                self._update_window(state, view, force=force)

    def _update_window(self, state: PanelState, view: View, *, force: bool) -> None:
        """Chart, statistics and note: recomputed only when a bucket has completed."""
        box = state.box
        now = view.store.now
        if box is None or now is None:
            return
        cells = box.chart_width
        bucket_s = trend.bucket_seconds(view.window_s, cells, view.interval_s)
        key = (
            trend.Buckets.at(now, bucket_s, cells).last,
            bucket_s,
            cells,
            box.chart_rows,
            view.window_s,
            id(view.store),
            view.model,
            view.engine,
            len(view.store.restarts()),
            view.knobs.get("max_num_seqs"),
        )
        if key == state.chart_key and not force:
            return
        state.chart_key = key
        pid = state.spec.id
        state.trend = panels.trend_of(state.spec, view, cells)
        self._draw_chart(state)
        summary = panels.summarize(state.spec, view)
        notes = summary.note_forms
        if self._compact and not self.shown(f"{pid}.stats") and not summary.note:
            notes = summary.stats_forms  # a row without a note shows the statistics there
        note = fitting(notes, self.room(f"{pid}.note"))
        stats = fitting(summary.stats_forms, self.room(f"{pid}.stats"))
        self.put(f"{pid}.note", Content.styled(note, "$text-muted"))
        self.put(f"{pid}.stats", Content.styled(stats, "$text-muted"))

    def _draw_chart(self, state: PanelState) -> None:
        box = state.box
        if box is None:
            return
        pid = state.spec.id
        t = state.trend
        if t is None:
            for r in range(box.chart_rows):
                self.put(f"{pid}.chart{r}", "")
            return
        width = box.chart_width
        values = list(t.values[-width:])
        pad = width - len(values)
        shift = len(t.values) - len(values) - pad
        marks = [c - shift for c in t.restarts if 0 <= c - shift < width]
        drawn = chart.rows([None] * pad + values, box.chart_rows, t.top, marks)
        for r, runs in enumerate(drawn):
            self.put(
                f"{pid}.chart{r}",
                Content.assemble(*((text, CHART_STYLES[style]) for text, style in runs)),
            )

    # -- selection ------------------------------------------------------------------------------

    def _move_to(self, index: int) -> None:
        old, self.cursor = self.cursor, max(0, min(len(self.order) - 1, index))
        if old != self.cursor:
            self._frame(self.order[old], False)
        self._frame(self.order[self.cursor], self._focused)

    def action_move(self, step: int) -> None:
        self._move_to(self.cursor + step * self._across)

    def action_side(self, step: int) -> None:
        """Left/right: the panel beside, in a row of two; else the neighbour column's."""
        col = self.cursor % self._across + step
        if 0 <= col < self._across and self.cursor + step < len(self.order):
            self._move_to(self.cursor + step)
        else:
            self.post_message(self.Side(self, step))

    def on_click(self, event: events.Click) -> None:
        for i, pid in enumerate(self.order):
            box = self.panels[pid].box
            if (
                box
                and box.x <= event.x < box.x + box.width
                and box.y <= event.y < box.y + box.height
            ):
                self._move_to(i)
                return

    def on_focus(self) -> None:
        # Textual runs this handler before its own, which sets `has_focus`: hence a flag.
        self._focused = True
        self._draw_frames()

    def on_blur(self) -> None:
        self._focused = False
        self._draw_frames()
