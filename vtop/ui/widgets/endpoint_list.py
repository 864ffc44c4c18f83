"""The endpoints being watched, one line each; the selected one fills the panels below.

Shown only when there is more than one `--url`. Up/down (or a click, or the number keys the
app binds) choose the endpoint, and the choice is posted as `Chosen`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from textual import events
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.message import Message
from textual.widget import Widget

from vtop.model import Severity
from vtop.ui.fleet import Row

_VERDICT_STYLE = {
    Severity.CRITICAL: "bold $error",
    Severity.WARNING: "bold $warning",
    Severity.INFO: "$primary",
    Severity.OK: "$success",
}


class EndpointList(Widget, can_focus=True):
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

    def show(self, rows: Sequence[Row], selected: int) -> None:
        new = tuple(rows)
        if new == self._rows and selected == self.selected:
            return
        grew = len(new) != len(self._rows)
        self._rows, self.selected = new, selected
        self.refresh(layout=grew)

    def action_move(self, step: int) -> None:
        if self._rows:
            self.post_message(self.Chosen((self.selected + step) % len(self._rows)))

    def on_click(self, event: events.Click) -> None:
        if 0 <= event.y < len(self._rows):
            self.post_message(self.Chosen(event.y))

    def get_content_height(self, container: object, viewport: object, width: int) -> int:
        return max(1, len(self._rows))

    def render(self) -> Content:
        parts: list[str | tuple[str, str]] = []
        for i, r in enumerate(self._rows):
            if i:
                parts.append("\n")
            chosen = i == self.selected
            parts.append(("▶ " if chosen else "  ", "bold $accent"))
            parts.append((f"{i + 1} ", "$text-muted"))
            parts.append((f"{r.name:<22.22} ", "bold" if chosen else ""))
            parts.append(("● " if r.up else "↻ ", "$success" if r.up else "$error"))
            parts.append((r.figures + "  ", ""))
            parts.append((r.verdict, _VERDICT_STYLE[r.severity]))
        return Content.assemble(*parts)
