"""A one-line text widget that repaints only when its text or styling actually changes.

Textual repaints a widget's whole region when it is refreshed, and every repaint is bytes on
the user's SSH link. `Static.update` refreshes (and may re-layout) unconditionally; a
`TextCell` compares the new content with what is on screen and does nothing when they match,
and it never asks for a layout: its size comes from the stylesheet, not from its text.
"""

from __future__ import annotations

from textual.content import Content
from textual.widget import Widget

from vtop.model import Severity

LEVEL_CLASSES = {Severity.WARNING: "-warning", Severity.CRITICAL: "-critical"}


class TextCell(Widget):
    """One line of text, sized by CSS."""

    DEFAULT_CSS = """
    TextCell {
        height: 1;
        width: 1fr;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    TextCell.-warning { color: $warning; text-style: bold; }
    TextCell.-critical { color: $error; text-style: bold reverse; }
    """

    def __init__(self, text: str | Content = "", *, id: str | None = None,
                 classes: str | None = None) -> None:  # fmt: skip
        super().__init__(id=id, classes=classes)
        self._content = text if isinstance(text, Content) else Content(text)

    @property
    def text(self) -> str:
        """The plain text on screen."""
        return self._content.plain

    def show(self, text: str | Content) -> bool:
        """Put `text` on screen; returns False (and repaints nothing) when it is already there."""
        new = text if isinstance(text, Content) else Content(text)
        old = self._content
        if new.plain == old.plain and list(new.spans) == list(old.spans):
            return False
        self._content = new
        # A cell sized by its text needs a layout when its length changes; others never do.
        self.refresh(layout=self.styles.width is not None and self.styles.width.is_auto
                     and new.cell_length != old.cell_length)  # fmt: skip
        return True

    def set_level(self, level: Severity) -> None:
        """Colour by severity (a CSS class, so NO_COLOR and themes keep working)."""
        want = LEVEL_CLASSES.get(level)
        for cls in LEVEL_CLASSES.values():
            self.set_class(cls == want, cls)

    def render(self) -> Content:
        return self._content
