"""The endpoints being watched, one line each; the selected one fills the panels below.

Shown only when there is more than one `--url`. A header names the columns; an endpoint
with several engines (data parallelism) has an indented line per engine under its own.
Up/down (or a click, or the number keys the app binds) choose the endpoint, and the choice is
posted as `Chosen`. A verdict still accruing (`likely …`) is drawn apart from a firing one:
in italics, not bold. Each line's figures are one field and its verdict another, so a changing
token rate repaints only the figures. The columns that do not fit are left out
(`fleet.visible`), least important first, so that every verdict reads whole, in its short
form where need be (`CRIT memory-ceiling`: it was `CRIT KV cache i…` at 80 columns). Where
the screen is short of rows (`vtop.ui.room`) the box shows the lines around the chosen
endpoint under the header.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from textual import events
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.geometry import Size
from textual.message import Message

from vtop.model import Severity
from vtop.ui import fleet
from vtop.ui.fleet import Row
from vtop.ui.room import fitting
from vtop.ui.widgets.fields import Field, FieldsWidget

VERDICT_STYLE = {
    Severity.CRITICAL: "bold $error",
    Severity.WARNING: "bold $warning",
    Severity.INFO: "$primary",
    Severity.OK: "$success",
}
LIKELY_STYLE = {
    Severity.CRITICAL: "italic $error",
    Severity.WARNING: "italic $warning",
    Severity.INFO: "italic $primary",
    Severity.OK: "italic $text-muted",
}
"""A likely cause (`likely …`, evidence still accruing): the severity's colour, not bold."""
NAME_W, VERDICT_MIN = 30, 16
"""The name column's widest, and the least room the verdict keeps before figures are left
out (more where a row's shortest verdict needs it)."""


class EndpointList(FieldsWidget, can_focus=True):
    """A line per endpoint with a selection."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "move(-1)", "Up", show=False),
        Binding("down,j", "move(1)", "Down", show=False),
    ]

    DEFAULT_CSS = """
    EndpointList { height: auto; }
    """

    class Chosen(Message):
        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    def __init__(self) -> None:
        super().__init__(id="endpoints")
        self.border_title = "Endpoints"
        self._rows: tuple[Row, ...] = ()
        self._lines: list[int] = []
        """The endpoint each line shows (its own line and its engines'); -1: the header."""
        self._columns: list[fleet.Column] = list(fleet.COLUMNS)
        self.selected = 0

    @property
    def rows(self) -> tuple[Row, ...]:
        return self._rows

    @property
    def needs(self) -> int:
        """Rows the box takes with every line in it, its border included."""
        return 2 + len(self._lines)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return max(1, len(self._lines))

    def show(self, rows: Sequence[Row], selected: int) -> None:
        new = tuple(rows)
        lines: list[int] = [-1]  # the header, then each endpoint and its engines
        for i, r in enumerate(new):
            lines += [i] * (1 + len(r.engines))
        if lines != self._lines:
            self.refresh(layout=True)
        self._rows, self.selected, self._lines = new, selected, lines
        self._place()
        self._fill()

    def _shown(self) -> list[int]:
        """The lines drawn (indexes into `_lines`): all where they fit, else the header and
        as many as fit from the chosen endpoint's line, moved up to fill the box."""
        height = self.size.height
        if height <= 0 or len(self._lines) <= height:
            return list(range(len(self._lines)))
        first = self._lines.index(self.selected) if self.selected in self._lines else 1
        first = max(1, min(first, len(self._lines) - (height - 1)))
        return [0, *range(first, first + height - 1)]

    def _fill(self) -> None:
        muted = "$text-muted"
        self.put("h.name", Content.styled("    endpoint", muted))
        self.put("h.figures", Content.styled(fleet.headers(self._columns), muted))
        self.put("h.verdict", Content.styled("top finding", muted))
        shown = self._shown()
        at = {line: y for y, line in enumerate(shown)}
        line = 1
        for i, r in enumerate(self._rows):
            y = at.get(line)
            line += 1 + len(r.engines)
            if y is not None:
                self._fill_endpoint(y, i, r)
            for n, e in enumerate(r.engines):
                y = at.get(line - len(r.engines) + n)
                if y is not None:
                    branch = "└ " if n == len(r.engines) - 1 else "├ "
                    self.put(f"{y}.name", Content.styled(f"      {branch}{e.name}", muted))
                    self.put(f"{y}.figures", fleet.figures(e.cells, self._columns))

    def _fill_endpoint(self, y: int, i: int, r: Row) -> None:
        chosen = i == self.selected
        self.put(
            f"{y}.name",
            Content.assemble(
                ("▶ " if chosen else "  ", "bold $accent"),
                (f"{i + 1} ", "$text-muted"),
                ("● " if r.up else "↻ ", "$success" if r.up else "$error"),
                (r.name, "bold" if chosen else ""),
            ),
        )
        self.put(f"{y}.figures", fleet.figures(r.cells, self._columns))
        style = (LIKELY_STYLE if r.likely else VERDICT_STYLE)[r.severity]
        verdict = fitting(r.verdicts, self.room(f"{y}.verdict"))
        self.put(f"{y}.verdict", Content.styled(verdict, style))

    def on_resize(self) -> None:
        self._place()
        self._fill()

    def _place(self) -> None:
        """The name, the figures that fit, the verdict: the figures give way (least important
        first, `fleet.DROP_ORDER`) until every row's verdict reads whole, in its short form
        at least (`Row.verdicts`)."""
        width = self.size.width
        layout: dict[str, Field] = {}
        names = [len(r.name) + 6 for r in self._rows]
        names += [len(e.name) + 8 for r in self._rows for e in r.engines]
        name_w = min(NAME_W, max(names, default=12))
        verdict_w = max((len(r.verdicts[-1]) for r in self._rows), default=VERDICT_MIN)
        self._columns = fleet.visible(width - name_w - 2 - max(VERDICT_MIN, verdict_w))
        fig_w = len(fleet.headers(self._columns))
        shown = self._shown()
        for y, line in enumerate(shown):
            i = self._lines[line]
            key = "h" if i < 0 else str(y)
            layout[f"{key}.name"] = Field(y, 0, min(name_w, width))
            x = name_w + 1
            if self._columns:
                layout[f"{key}.figures"] = Field(y, x, fig_w)
                x += fig_w + 2
            engine_row = i >= 0 and self._lines[line - 1] == i
            if x < width and not engine_row:
                layout[f"{key}.verdict"] = Field(y, x, width - x)
        self.place(layout)

    def action_move(self, step: int) -> None:
        if self._rows:
            self.post_message(self.Chosen((self.selected + step) % len(self._rows)))

    def on_click(self, event: events.Click) -> None:
        shown = self._shown()
        if 0 <= event.y < len(shown) and self._lines[shown[event.y]] >= 0:
            self.post_message(self.Chosen(self._lines[shown[event.y]]))
