"""The endpoints being watched, one line each; the selected one fills the panels below.

Shown only when there is more than one `--url`. Up/down (or a click, or the number keys the
app binds) choose the endpoint, and the choice is posted as `Chosen`. Each line's figures are
one field and its verdict another, so a changing token rate repaints only the figures.
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
from vtop.ui.fleet import Row
from vtop.ui.widgets.fields import Field, FieldsWidget

VERDICT_STYLE = {
    Severity.CRITICAL: "bold $error",
    Severity.WARNING: "bold $warning",
    Severity.INFO: "$primary",
    Severity.OK: "$success",
}
NAME_W, FIGURES_W = 30, 62


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
        self.selected = 0

    @property
    def rows(self) -> tuple[Row, ...]:
        return self._rows

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return max(1, len(self._rows))

    def show(self, rows: Sequence[Row], selected: int) -> None:
        new = tuple(rows)
        if len(new) != len(self._rows):
            self.refresh(layout=True)
        self._rows, self.selected = new, selected
        self._place()
        for y, r in enumerate(new):
            chosen = y == selected
            self.put(f"{y}.name", Content.assemble(
                ("▶ " if chosen else "  ", "bold $accent"), (f"{y + 1} ", "$text-muted"),
                ("● " if r.up else "↻ ", "$success" if r.up else "$error"),
                (r.name, "bold" if chosen else "")))  # fmt: skip
            self.put(f"{y}.figures", r.figures)
            self.put(f"{y}.verdict", Content.styled(r.verdict, VERDICT_STYLE[r.severity]))

    def on_resize(self) -> None:
        self._place()

    def _place(self) -> None:
        width = self.size.width
        layout: dict[str, Field] = {}
        figures = width >= NAME_W + FIGURES_W + 20  # narrow: name and verdict only
        for y in range(len(self._rows)):
            layout[f"{y}.name"] = Field(y, 0, min(NAME_W, width))
            x = NAME_W + 1
            if figures:
                layout[f"{y}.figures"] = Field(y, x, FIGURES_W)
                x += FIGURES_W + 2
            if x < width:
                layout[f"{y}.verdict"] = Field(y, x, width - x)
        self.place(layout)

    def action_move(self, step: int) -> None:
        if self._rows:
            self.post_message(self.Chosen((self.selected + step) % len(self._rows)))

    def on_click(self, event: events.Click) -> None:
        if 0 <= event.y < len(self._rows):
            self.post_message(self.Chosen(event.y))
