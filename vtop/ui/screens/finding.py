"""Enter on a finding: its evidence, the rule, and each recommendation's formula and inputs.

`c` here copies this finding's flags only. The body wraps its own lines at its width
(`detail.wrap`), so a long value continues under itself rather than at the left edge; the
box's hint is docked at its bottom, so it shows however long the body is.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.geometry import Size
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Static

from vtop.model import Finding
from vtop.ui import detail


class DetailBody(Widget):
    """The detail's lines, wrapped at the widget's width with hanging indents."""

    DEFAULT_CSS = """
    DetailBody { height: auto; }
    """

    def __init__(self, rows: list[detail.Row]) -> None:
        super().__init__(id="finding-body")
        self._rows = rows
        self._wrapped: tuple[int, list[str]] = (-1, [])

    def wrapped(self, width: int) -> list[str]:
        if self._wrapped[0] != width:
            self._wrapped = (width, detail.wrap(self._rows, width))
        return self._wrapped[1]

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.wrapped(width))

    def render(self) -> Content:
        # Content, not markup: evidence values and provenance are the server's own text.
        return Content("\n".join(self.wrapped(self.content_region.width)))


class FindingScreen(ModalScreen[None]):
    """One finding in full."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "dismiss", "Close"),
        Binding("c", "copy", "Copy flags"),
    ]

    def __init__(self, finding: Finding, now: float | None) -> None:
        super().__init__()
        self.finding = finding
        self._now = now

    def compose(self) -> ComposeResult:
        with Vertical(id="finding", classes="dialog") as box:
            box.border_title = f"{self.finding.rule}"
            with VerticalScroll():
                yield DetailBody(detail.rows(self.finding, self._now))
            yield Static("[dim]Escape closes · c copies the flags[/dim]", classes="dialog-hint")

    def action_copy(self) -> None:
        flags = " ".join(r.flag for r in self.finding.recommendations)
        copy = getattr(self.app, "copy_flags", None)
        if callable(copy):
            copy(flags)
