"""A bar chart over fixed time buckets, drawn with eighth blocks, as many rows tall as it is.

The chart holds a `Trend` (values per completed bucket) and repaints only when it is given a
different one; its parent recomputes the trend only when a bucket boundary passes, the window
changes or the chart is resized (`Resized` tells it the new width). Colours are theme
variables; an unknown bucket is a dotted baseline and a server restart a `↻` in the top row.
"""

from __future__ import annotations

from textual import events
from textual.content import Content
from textual.message import Message
from textual.widget import Widget

from vtop.ui import chart
from vtop.ui.panels import Trend

_STYLES: dict[chart.RunStyle, str] = {
    "bar": "$accent",
    "gap": "$text-disabled",
    "restart": "bold $warning",
    "cap": "$text-muted",
}


class Spark(Widget):
    """A multi-row sparkline."""

    DEFAULT_CSS = """
    Spark {
        width: 1fr;
        height: 1fr;
        min-height: 1;
    }
    """

    class Resized(Message):
        """The chart's size changed: its parent should recompute the trend for `cells`."""

        def __init__(self, spark: Spark, cells: int) -> None:
            super().__init__()
            self.spark = spark
            self.cells = cells

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._trend: Trend | None = None
        self._cache: tuple[tuple[int, int], Content] | None = None

    @property
    def cells(self) -> int:
        """How many buckets fit: one per column."""
        return self.content_size.width

    @property
    def trend(self) -> Trend | None:
        return self._trend

    def show(self, trend: Trend | None) -> bool:
        """Draw `trend`; False (no repaint) when it is what is already drawn."""
        if trend == self._trend:
            return False
        self._trend = trend
        self._cache = None
        self.refresh()
        return True

    def on_resize(self, event: events.Resize) -> None:
        self._cache = None
        self.post_message(self.Resized(self, event.size.width))

    def render(self) -> Content:
        size = (self.content_size.width, self.content_size.height)
        if self._cache is not None and self._cache[0] == size:
            return self._cache[1]
        content = self._draw(*size)
        self._cache = (size, content)
        return content

    def _draw(self, width: int, height: int) -> Content:
        t = self._trend
        if t is None or width <= 0 or height <= 0:
            return Content("")
        values = t.values[-width:]
        pad = width - len(values)
        marks = [c - (len(t.values) - len(values)) + pad for c in t.restarts]
        rows = chart.rows([None] * pad + list(values), height, t.top, marks)
        parts: list[str | tuple[str, str]] = []
        for i, runs in enumerate(rows):
            if i:
                parts.append("\n")
            parts.extend((text, _STYLES[style]) for text, style in runs)
        return Content.assemble(*parts)
