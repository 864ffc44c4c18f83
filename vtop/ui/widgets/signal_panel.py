"""One scheduler signal: its value now, a chart over the window, the window's statistics.

The same widget is a bordered box on a roomy terminal (value, chart rows, note, statistics)
and a single row on a small one (label, value, chart, note); it picks by its own height,
which the stylesheet sets. Each of those is a field of a `FieldsWidget`: the value is
recomputed every poll and repaints its own cells when it changes; the chart, the note and the
statistics are recomputed only when a bucket boundary passes (or the window, the size or the
endpoint changes), and each chart row repaints only if it changed.
"""

from __future__ import annotations

from textual.content import Content

from vtop.model import Severity
from vtop.ui import chart, panels, trend
from vtop.ui.panels import PanelSpec, Trend, View
from vtop.ui.widgets.fields import Field, FieldsWidget

CHART_STYLES: dict[chart.RunStyle, str] = {
    "bar": "$primary",
    "gap": "$text-disabled",
    "restart": "bold $warning",
    "cap": "$text-muted",
}
VALUE_STYLES = {Severity.WARNING: "bold $warning", Severity.CRITICAL: "bold reverse $error"}
LABEL_W, VALUE_W, NOTE_W, STATS_W = 9, 21, 26, 34


class SignalPanel(FieldsWidget, can_focus=True):
    """A panel for one `PanelSpec`."""

    DEFAULT_CSS = """
    SignalPanel { height: 1fr; }
    """

    def __init__(self, spec: PanelSpec) -> None:
        super().__init__(id=f"panel-{spec.id}", classes="signal-panel")
        self.spec = spec
        self.border_title = spec.title
        self.trend: Trend | None = None
        self.level = Severity.OK
        """The value's level now (what the value is coloured by)."""
        self._view: View | None = None
        self._chart_key: tuple[object, ...] | None = None
        self._chart_rows = 0
        self._chart_width = 0

    # -- layout ---------------------------------------------------------------------------------

    @property
    def compact(self) -> bool:
        """The one-row layout (small terminals)."""
        return self.size.height <= 2

    def _place(self) -> None:
        w, h = self.size
        if w <= 0 or h <= 0:
            return
        layout: dict[str, Field] = {}
        if h <= 2:
            stats_w = STATS_W if w >= 140 else 0
            note_w = NOTE_W if w >= 70 else max(0, w - LABEL_W - VALUE_W - 12)
            if stats_w:
                note_w = 36
            chart_w = max(1, w - LABEL_W - VALUE_W - note_w - stats_w - (2 if stats_w else 1))
            layout["label"] = Field(0, 0, LABEL_W)
            layout["value"] = Field(0, LABEL_W, VALUE_W)
            layout["chart0"] = Field(0, LABEL_W + VALUE_W, chart_w)
            x = LABEL_W + VALUE_W + chart_w + 1
            if note_w:
                layout["note"] = Field(0, x, note_w)
            if stats_w:
                layout["stats"] = Field(0, x + note_w + 1, stats_w)
            rows = 1
        else:
            rows = max(1, h - 3)
            layout["value"] = Field(0, 0, w)
            for r in range(rows):
                layout[f"chart{r}"] = Field(1 + r, 0, w)
            if h >= 3:
                layout["note"] = Field(min(h - 2, 1 + rows), 0, w)
            if h >= 4:
                layout["stats"] = Field(h - 1, 0, w)
            chart_w = w
        self._chart_rows, self._chart_width = rows, chart_w
        self.place(layout)

    def on_resize(self) -> None:
        self._place()
        self._label()
        self._update_window(force=True)

    def on_focus(self) -> None:
        self._label()

    def on_blur(self) -> None:
        self._label()

    def _label(self) -> None:
        style = "bold $accent" if self.has_focus else "$text-muted"
        self.put("label", Content.styled(self.spec.short, style))

    # -- data -----------------------------------------------------------------------------------

    def show(self, view: View) -> None:
        """New data (or a new window, or another endpoint): update what changed."""
        self._view = view
        reading = panels.read(self.spec, view)
        value = reading.value
        if self.spec.unit and not value.startswith("–"):
            value = f"{value} {self.spec.unit}"
        self.put("value", Content.styled(value, VALUE_STYLES.get(reading.level, "bold")))
        self.level = reading.level
        self._update_window()

    def _update_window(self, *, force: bool = False) -> None:
        """Chart, statistics and note: recomputed only when a bucket has completed."""
        view = self._view
        cells = self._chart_width
        if view is None or cells <= 0:
            return
        now = view.store.now
        if now is None:
            return
        bucket_s = trend.bucket_seconds(view.window_s, cells, view.interval_s)
        key = (
            trend.Buckets.at(now, bucket_s, cells).last,
            bucket_s,
            cells,
            self._chart_rows,
            view.window_s,
            id(view.store),
            view.model,
            view.engine,
            len(view.store.restarts()),
            view.knobs.get("max_num_seqs"),
        )
        if key == self._chart_key and not force:
            return
        self._chart_key = key
        self.trend = panels.trend_of(self.spec, view, cells)
        self._draw_chart()
        summary = panels.summarize(self.spec, view)
        note = summary.note
        if self.compact and not self.shown("stats"):
            note = note or summary.stats
        self.put("note", Content.styled(note, "$text-muted"))
        self.put("stats", Content.styled(summary.stats, "$text-muted"))

    def _draw_chart(self) -> None:
        t = self.trend
        rows = self._chart_rows
        if t is None:
            for r in range(rows):
                self.put(f"chart{r}", "")
            return
        width = self._chart_width
        values = list(t.values[-width:])
        pad = width - len(values)
        shift = len(t.values) - len(values) - pad
        marks = [c - shift for c in t.restarts if 0 <= c - shift < width]
        drawn = chart.rows([None] * pad + values, rows, t.top, marks)
        for r, runs in enumerate(drawn):
            self.put(f"chart{r}", Content.assemble(*((text, CHART_STYLES[style])
                                                     for text, style in runs)))  # fmt: skip
