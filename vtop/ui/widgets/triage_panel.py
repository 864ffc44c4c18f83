"""The verdict: firing findings with their fixes, pending ones dimmed with their progress.

A focusable list: up/down move a cursor over the findings, Enter (or a click) posts
`Selected` and the app opens the finding's detail screen. It renders only the lines that fit,
keeping the cursor in view, and says how many more there are; it repaints only when its lines
or the cursor change.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from textual import events
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.message import Message
from textual.widget import Widget

from vtop.model import Finding, Severity
from vtop.ui.verdict import Line

_LABEL_STYLE = {
    Severity.CRITICAL: "bold reverse $error",
    Severity.WARNING: "bold reverse $warning",
    Severity.INFO: "bold $primary",
    Severity.OK: "bold $success",
}
_LABEL_W = 5


class TriagePanel(Widget, can_focus=True):
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
        """The finding under the cursor (the first firing one when there is no cursor yet)."""
        if not self._lines:
            return None
        return self._lines[min(self._cursor, len(self._lines) - 1)].finding

    def show(self, lines: Sequence[Line]) -> None:
        new = tuple(lines)
        if new == self._lines:
            return
        old_finding = self.selected
        grew = len(new) != len(self._lines)
        self._lines = new
        self._cursor = self._place_cursor(old_finding)
        self.refresh(layout=grew)

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

    def action_move(self, step: int) -> None:
        """Move to the next line that is a different finding."""
        if not self._lines:
            return
        current = self.selected
        i = self._cursor
        while 0 <= i + step < len(self._lines):
            i += step
            f = self._lines[i].finding
            if f is not None and f is not current:
                self._cursor = i
                self.refresh()
                return

    def action_open(self) -> None:
        finding = self.selected
        if finding is not None:
            self.post_message(self.Selected(finding))

    def on_click(self, event: events.Click) -> None:
        top = self._first_visible()
        i = top + event.y
        if 0 <= i < len(self._lines) and self._lines[i].finding is not None:
            self._cursor = i
            self.refresh()
            if event.chain >= 2:
                self.action_open()

    def get_content_height(self, container: object, viewport: object, width: int) -> int:
        return max(1, len(self._lines))

    def _first_visible(self) -> int:
        height = max(1, self.content_size.height)
        if len(self._lines) <= height:
            return 0
        return max(0, min(self._cursor - 1, len(self._lines) - height + 1))

    def render(self) -> Content:
        height = max(1, self.content_size.height)
        width = max(1, self.content_size.width)
        lines = self._lines
        top = self._first_visible()
        shown = list(lines[top : top + height])
        more = len(lines) - (top + len(shown))
        if more > 0 and shown:
            shown = shown[:-1]
            more += 1
        selected = self.selected
        parts: list[str | tuple[str, str] | Content] = []
        for n, line in enumerate(shown):
            if n:
                parts.append("\n")
            parts.append(self._line(line, width, line.finding is not None
                                    and line.finding is selected and self.has_focus))  # fmt: skip
        if more > 0:
            if parts:
                parts.append("\n")
            parts.append((f"  +{more} more (↑↓ to scroll, Enter for details)", "$text-muted"))
        return Content.assemble(*parts)

    def _line(self, line: Line, width: int, cursor: bool) -> Content:
        label = line.label.ljust(_LABEL_W - 1)[: _LABEL_W - 1] + " "
        text = line.text
        room = width - _LABEL_W
        if len(text) > room > 1:
            text = text[: room - 1] + "…"
        if line.kind == "firing":
            body: tuple[str, str] = (text, "bold")
            head = (label, _LABEL_STYLE[line.severity])
        elif line.kind == "action":
            body, head = (text, "$accent"), (" " * _LABEL_W, "")
        elif line.kind == "error":
            body, head = (text, "$error"), (label, "bold reverse $error")
        elif line.kind == "ok":
            body, head = (text, ""), (label, _LABEL_STYLE[Severity.OK])
        else:
            body, head = (text, "$text-muted"), (label, "$text-muted")
        content = Content.assemble(head, body)
        if cursor:
            content = content.stylize_before("on $block-cursor-background")
        return content

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()
