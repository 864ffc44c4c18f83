"""One line of fields, left to right, each as wide as its text (or a fixed width).

Textual rewrites a changed line from the left edge of the widget that draws it up to the end
of the change. A value that changes every poll therefore belongs at the left of a narrow
widget: the header is two of these rows, the steady one (endpoint, model, version) and the
moving one (poll latency first, then the connection, cadence and vtop's own cost).

A field that does not fit whole is left out, never cut, except the first (the endpoint),
which is the last thing on the row to go: its owner decides the widths (`HeaderBar`).
"""

from __future__ import annotations

from collections.abc import Mapping

from textual.content import Content
from textual.geometry import Size

from vtop.ui.widgets.fields import Field, FieldsWidget

GAP = 2


class FieldRow(FieldsWidget):
    """Fields placed left to right; those that do not fit whole are left out."""

    DEFAULT_CSS = """
    FieldRow { height: 1; }
    """

    def __init__(
        self,
        *,
        fixed: Mapping[str, int] | None = None,
        widest: Mapping[str, int] | None = None,
        id: str | None = None,
    ) -> None:
        super().__init__(id=id)
        self._fixed = dict(fixed or {})
        self._widest = dict(widest or {})
        self._texts: dict[str, Content] = {}
        self._natural = 0

    def show(self, texts: Mapping[str, Content]) -> None:
        """Show these fields, in this order (a field left out is hidden)."""
        self._texts = dict(texts)
        natural = sum(self._width(n) for n in self._texts) + GAP * max(0, len(self._texts) - 1)
        if natural != self._natural:
            self._natural = natural
            self.refresh(layout=True)  # an auto-width row changes size
        self._place()
        with self.repaint_once():
            for name, content in self._texts.items():
                self.put(name, content)

    def _width(self, name: str) -> int:
        if name in self._fixed:
            return self._fixed[name]
        return min(self._texts[name].cell_length, self._widest.get(name, 10_000))

    def get_content_width(self, container: Size, viewport: Size) -> int:
        return self._natural

    def on_resize(self) -> None:
        self._place()

    def _place(self) -> None:
        width = self.size.width
        if width <= 0:
            return
        layout: dict[str, Field] = {}
        x = 0
        for n, name in enumerate(self._texts):
            w = self._width(name)
            if n == 0:
                w = min(w, width)  # the first is cut, the last thing to go
            elif x + w > width:
                continue  # left out whole: a shorter one after it may still fit
            layout[name] = Field(0, x, w)
            x += w + GAP
        self.place(layout)
