"""Enter on a finding: its evidence, the rule, and each recommendation's formula and inputs.

`c` here copies this finding's flags only. The body wraps its own lines at its width
(`detail.wrap`), so a long value continues under itself rather than at the left edge; the
box's hint is docked at its bottom, so it shows however long the body is.

Under the recommendations, their predicted effect: the store is read as the screen mounts (on
the loop that feeds it) and the twin runs on a thread worker (`vtop.ui.prediction`), so the
screen opens at once with "running the twin…" and keeps answering keys while it runs; the rows
are replaced when it is done. A screen closed before then drops the answer (the app's
`Predictor` keeps it for the next look). Where the twin chose another value than the rule's
formula, the Change and Recommendations rows are rebuilt with the twin's choice, and `c` copies
it: the screen never shows one value and predicts another.
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
from textual.worker import Worker

from vtop.model import Finding
from vtop.monitor import Monitor
from vtop.ui.prediction import Job, Predicted, Predictor
from vtop.ui.screens import predicting
from vtop.ui.views import detail


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

    def set_rows(self, rows: list[detail.Row]) -> None:
        """New lines (the prediction came): wrapped afresh, and the height follows."""
        self._rows = rows
        self._wrapped = (-1, [])
        self.refresh(layout=True)

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

    def __init__(
        self,
        finding: Finding,
        now: float | None,
        *,
        monitor: Monitor | None = None,
        predictor: Predictor | None = None,
    ) -> None:
        """`monitor` and `predictor`: where the predicted effect comes from (none: no block)."""
        super().__init__()
        self.finding = finding
        self._now = now
        self._rows = detail.rows(finding, now)
        self._predicted: list[detail.Row] = []
        self._job: Job | None = None
        if monitor is not None and predictor is not None:
            started = predictor.start(monitor, finding)  # the store, read on the loop
            if callable(started):
                self._job = started
                self._predicted = detail.predicting_rows()
            else:
                self._show(started)

    def compose(self) -> ComposeResult:
        with Vertical(id="finding", classes="dialog") as box:
            box.border_title = f"{self.finding.rule}"
            with VerticalScroll():
                yield DetailBody(self._body())
            yield Static("[dim]Escape closes · c copies the flags[/dim]", classes="dialog-hint")

    def on_mount(self) -> None:
        if self._job is not None:
            predicting.run(self, self._job)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        done = predicting.ended(event, self.finding)
        if done is None:
            return
        self._show(done)
        self.query_one(DetailBody).set_rows(self._body())

    def _show(self, predicted: Predicted) -> None:
        """The twin's block, and the finding as the twin chose its values."""
        self._predicted = predicted.rows
        if predicted.finding is not self.finding:
            self.finding = predicted.finding
            self._rows = detail.rows(predicted.finding, self._now)

    def _body(self) -> list[detail.Row]:
        """The detail with the predicted effect before the evidence: what the advice will
        buy is read with the verdict, not found below the arithmetic."""
        return detail.with_prediction(self._rows, self._predicted)

    def action_copy(self) -> None:
        flags = " ".join(r.flag for r in self.finding.recommendations)
        copy = getattr(self.app, "copy_flags", None)
        if callable(copy):
            copy(flags)
