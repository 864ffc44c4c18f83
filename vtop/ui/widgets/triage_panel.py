"""The verdict: firing findings with their fixes, pending ones dimmed with their progress.

A focusable list: up/down move a cursor over the findings, Enter (or a double click) posts
`Selected` and the app opens the finding's detail screen. It shows the lines that fit, keeps
the cursor in view, and says how many more there are. Each line is a field, so a pending
finding whose progress ticks ("40 of 60 s" -> "41 of 60 s") repaints that one line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from textual import events
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.geometry import Size
from textual.message import Message

from vtop.model import Finding, Severity
from vtop.ui.verdict import Line
from vtop.ui.widgets.fields import Field, FieldsWidget

LABEL_STYLE = {
    Severity.CRITICAL: "bold reverse $error",
    Severity.WARNING: "bold reverse $warning",
    Severity.INFO: "bold $primary",
    Severity.OK: "bold $success",
}
LABEL_W = 5


def render_line(line: Line, width: int, cursor: bool) -> Content:
    """One line of the panel: a severity label column, then the text."""
    label = line.label.ljust(LABEL_W - 1)[: LABEL_W - 1] + " "
    text = line.text
    room = width - LABEL_W
    if len(text) > room > 1:
        text = text[: room - 1] + "…"
    head: tuple[str, str]
    if line.kind == "firing":
        body, head = (text, "bold"), (label, LABEL_STYLE[line.severity])
    elif line.kind == "action":
        body, head = (text, "$accent"), (" " * LABEL_W, "")
    elif line.kind == "error":
        body, head = (text, "$error"), (label, "bold reverse $error" if line.label else "")
    elif line.kind == "ok":
        body, head = (text, ""), (label, LABEL_STYLE[Severity.OK])
    else:
        body, head = (text, "$text-muted"), (label, "$text-muted")
    content = Content.assemble(head, body)
    if cursor:
        content = content.stylize_before("on $boost")
    return content


class TriagePanel(FieldsWidget, can_focus=True):
    """The findings of the selected endpoint."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "move(-1)", "Up", show=False),
        Binding("down,j", "move(1)", "Down", show=False),
        Binding("enter", "open", "Details"),
    ]

    DEFAULT_CSS = """
    TriagePanel { height: auto; }
    """

    class Selected(Message):
        """Enter was pressed on a finding."""

        def __init__(self, finding: Finding) -> None:
            super().__init__()
            self.finding = finding

    def __init__(self) -> None:
        super().__init__(id="triage")
        self.border_title = "Triage"
        self._lines: tuple[Line, ...] = ()
        self._cursor = 0

    @property
    def lines(self) -> tuple[Line, ...]:
        return self._lines

    @property
    def selected(self) -> Finding | None:
        """The finding under the cursor."""
        if not self._lines:
            return None
        return self._lines[min(self._cursor, len(self._lines) - 1)].finding

    def show(self, lines: Sequence[Line]) -> None:
        new = tuple(lines)
        if new == self._lines:
            return
        keep = self.selected
        resized = len(new) != len(self._lines)
        self._lines = new
        self._cursor = self._place_cursor(keep)
        if resized:
            self.refresh(layout=True)
        self._draw()

    def _place_cursor(self, keep: Finding | None) -> int:
        """Keep the cursor on the same rule when the list changes, else on the first finding."""
        if keep is not None:
            for i, line in enumerate(self._lines):
                if line.finding is not None and line.finding.rule == keep.rule:
                    return i
        for i, line in enumerate(self._lines):
            if line.finding is not None:
                return i
        return 0

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return max(1, len(self._lines))

    def on_resize(self) -> None:
        self._draw()

    def on_focus(self) -> None:
        self._draw()

    def on_blur(self) -> None:
        self._draw()

    def _first_visible(self) -> int:
        height = max(1, self.size.height)
        if len(self._lines) <= height or self._cursor < height - 1:
            return 0  # the top lines (DOWN, what is pending) stay while the cursor is in view
        return max(0, min(self._cursor - 1, len(self._lines) - height + 1))

    def _draw(self) -> None:
        width, height = self.size
        if width <= 0 or height <= 0:
            return
        self.place({f"l{y}": Field(y, 0, width) for y in range(height)})
        top = self._first_visible()
        shown = list(self._lines[top : top + height])
        more = len(self._lines) - (top + len(shown))
        if more > 0 and shown:
            shown = shown[:-1]
            more += 1
        selected = self.selected
        for y in range(height):
            if y < len(shown):
                line = shown[y]
                cursor = self.has_focus and line.finding is not None and line.finding is selected
                self.put(f"l{y}", render_line(line, width, cursor))
            elif y == len(shown) and more > 0:
                hint = f"  +{more} more (↑↓ to scroll, Enter for details)"
                self.put(f"l{y}", Content.styled(hint, "$text-muted"))
            else:
                self.put(f"l{y}", "")

    def action_move(self, step: int) -> None:
        """Move to the next line that is a different finding."""
        current = self.selected
        i = self._cursor
        while 0 <= i + step < len(self._lines):
            i += step
            f = self._lines[i].finding
            if f is not None and f is not current:
                self._cursor = i
                self._draw()
                return

    def action_open(self) -> None:
        finding = self.selected
        if finding is not None:
            self.post_message(self.Selected(finding))

    def on_click(self, event: events.Click) -> None:
        i = self._first_visible() + event.y
        if 0 <= i < len(self._lines) and self._lines[i].finding is not None:
            self._cursor = i
            self._draw()
            if event.chain >= 2:
                self.action_open()
