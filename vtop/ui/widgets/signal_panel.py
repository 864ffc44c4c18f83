"""One scheduler signal: its value now, a chart over the window, the window's statistics.

The same widget is a bordered box on a roomy terminal and a single row (label, value, chart,
note) on a small one; the stylesheet chooses by the screen's size classes. `show(view)` is
called once per poll with the data; the value line is recomputed every poll (cheap), the chart
only when a bucket boundary passes, the window changes or the chart is resized, and each
child repaints only when its text changed.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical

from vtop.ui import panels, trend
from vtop.ui.panels import PanelSpec, View
from vtop.ui.widgets.spark import Spark
from vtop.ui.widgets.text_cell import TextCell


class SignalPanel(Vertical, can_focus=True):
    """A panel for one `PanelSpec`."""

    def __init__(self, spec: PanelSpec) -> None:
        super().__init__(id=f"panel-{spec.id}", classes="signal-panel")
        self.spec = spec
        self.border_title = spec.title
        self._view: View | None = None
        self._chart_key: tuple[object, ...] | None = None
        self.value = TextCell("–", classes="value")
        self.spark = Spark()
        self.note = TextCell("", classes="note")
        self.stats = TextCell("", classes="stats")

    def compose(self) -> ComposeResult:
        yield TextCell(self.spec.short, classes="label")
        yield self.value
        yield self.spark
        yield self.note
        yield self.stats

    @property
    def compact(self) -> bool:
        """True in the one-row layout (no stats line: the note falls back to the stats)."""
        if not self.is_mounted:
            return False
        screen = self.screen
        return screen.has_class("-narrow") or screen.has_class("-short")

    def on_resize(self) -> None:
        if self._view is not None:
            self.show(self._view)

    def show(self, view: View) -> None:
        """New data (or a new window): update what changed."""
        self._view = view
        reading = panels.read(self.spec, view)
        unit = self.spec.unit
        value = reading.value
        if unit and not value.startswith("–"):
            value = f"{value} {unit}"
        self.value.show(value)
        self.value.set_level(reading.level)
        self.note.show(reading.note or (reading.stats if self.compact else ""))
        self.stats.show(reading.stats)
        self._update_chart()

    def _update_chart(self) -> None:
        view = self._view
        spark = self.spark
        cells = spark.cells
        if view is None or cells <= 0:
            return
        now = view.store.now
        if now is None:
            spark.show(None)
            return
        bucket_s = trend.bucket_seconds(view.window_s, cells, view.interval_s)
        key = (
            trend.Buckets.at(now, bucket_s, cells).last,
            bucket_s,
            cells,
            view.window_s,
            id(view.store),
            view.model,
            view.engine,
            len(view.store.restarts()),
            view.knobs.get("max_num_seqs"),
        )
        if key == self._chart_key:
            return
        self._chart_key = key
        spark.show(panels.trend_of(self.spec, view, cells))

    def on_spark_resized(self, event: Spark.Resized) -> None:
        event.stop()
        self._update_chart()
