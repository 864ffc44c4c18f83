"""The nine scheduler panels: three `PanelColumn`s side by side, or one column of rows.

Roomy terminals get a 3×3 grid: column i holds panels i, i+3, i+6, so the grid reads left to
right, top to bottom (running, waiting, KV cache first). Compact terminals (the screen's
-compact class, which the app sets where the grid would not fit: `VtopApp._choose_layout`) get
one column of one-line rows in the same order, the other two columns hidden. The grid routes
data to the columns and answers for a panel wherever it is.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Container

from vtop.model import Severity
from vtop.ui.panels import PANELS, PanelSpec, Trend, View
from vtop.ui.widgets.panel_column import PanelColumn

COLUMNS = 3


class SchedulerGrid(Container):
    """All scheduler panels."""

    DEFAULT_CSS = """
    SchedulerGrid { layout: horizontal; height: 1fr; }
    SchedulerGrid > PanelColumn { margin-right: 1; }
    SchedulerGrid > PanelColumn#col-2 { margin-right: 0; }
    """

    def __init__(self) -> None:
        super().__init__(id="panels")
        self.columns = [PanelColumn(id=f"col-{i}") for i in range(COLUMNS)]
        self.order = [spec.id for spec in PANELS]
        self.compact = False
        self.across = 1
        """Compact panels to a row (`vtop.ui.room`): two where the screen is short of rows."""

    def compose(self) -> ComposeResult:
        yield from self.columns

    def on_mount(self) -> None:
        self.assign()

    def on_resize(self) -> None:
        self.assign()

    def assign(self, across: int | None = None) -> None:
        """Give the columns their panels for the screen's layout (compact or roomy; `across`:
        compact panels to a row, as the app last chose when not given)."""
        compact = self.screen.has_class("-compact")
        self.compact = compact
        self.across = self.across if across is None else across
        for i, column in enumerate(self.columns):
            if compact:
                specs = list(PANELS) if i == 0 else []
            else:
                specs = [PANELS[j] for j in range(i, len(PANELS), COLUMNS)]
            column.hold(specs, compact=compact, across=self.across)
            if column.display != bool(specs):
                column.display = bool(specs)

    def show(self, view: View) -> None:
        for column in self.columns:
            if column.order:
                column.show(view)

    def column_of(self, pid: str) -> PanelColumn:
        return next(c for c in self.columns if c.holds(pid))

    def text(self, name: str) -> str:
        """A field's text, `pid.part` (`kv.value`, `ttft.note`, `running.chart0`)."""
        pid = name.split(".", 1)[0]
        return self.column_of(pid).text(name)

    def value(self, pid: str) -> str:
        return self.column_of(pid).value(pid)

    def note(self, pid: str) -> str:
        return self.column_of(pid).note(pid)

    def stats(self, pid: str) -> str:
        return self.column_of(pid).stats(pid)

    def trend(self, pid: str) -> Trend | None:
        return self.column_of(pid).trend(pid)

    def level(self, pid: str) -> Severity:
        return self.column_of(pid).level(pid)

    def select(self, pid: str) -> None:
        """Put the cursor on a panel and focus its column."""
        column = self.column_of(pid)
        column.select(pid)
        column.focus()

    @property
    def selected(self) -> PanelSpec | None:
        """The panel under the cursor of the focused column (None: no column has focus)."""
        for column in self.columns:
            if column.has_focus:
                return column.selected
        return None

    def on_panel_column_side(self, message: PanelColumn.Side) -> None:
        """Left/right from a column: the same row of the neighbour column."""
        message.stop()
        i = self.columns.index(message.column) + message.step
        if 0 <= i < len(self.columns) and self.columns[i].order:
            target = self.columns[i]
            target.cursor = min(message.column.cursor, len(target.order) - 1)
            target.focus()
