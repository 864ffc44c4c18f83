"""The replay's findings: one pass of the report's code over the whole trace, in a worker
thread, streamed in as it goes.

The triage panel shows the findings of the last rule evaluation at or before the position,
which is what `vtop --replay FILE --report --to T` says at T; the pass also yields the
timeline's marks and training's questions. Training plays while the pass runs, held at the
first moment a finding fires (no question comes before it). A mixin of `ReplayApp`
(`vtop.ui.replay_host` says how the parts fit).
"""

from __future__ import annotations

from collections.abc import Sequence

from textual import work
from textual.worker import get_current_worker

from vtop.model import Finding
from vtop.monitor import Monitor
from vtop.trace.reader import TraceError
from vtop.ui.replay_host import ReplayHost
from vtop.ui.views.player import Analysis, Cancelled, Chunk, analyse
from vtop.ui.views.training import Session


class AnalysisMixin(ReplayHost):
    """The pass over the trace (`_analyse`), its chunks as they come, its end (`analysed`)."""

    @work(thread=True, exclusive=True, group="analysis", exit_on_error=False)
    def _analyse(self) -> None:
        worker = get_current_worker()

        def send(chunk: Chunk) -> None:
            if not worker.is_cancelled:
                self.call_from_thread(self._take_chunk, chunk)

        try:
            analysis = analyse(
                self.replay.reader.path,
                self.rules,
                self.catalog,
                on_chunk=send,
                cancelled=lambda: worker.is_cancelled,
                warn=lambda message: None,
            )
        except Cancelled:
            return
        except TraceError as exc:
            self.call_from_thread(self.notify, f"findings: {exc}", severity="error", timeout=10)
            return
        if not worker.is_cancelled:
            self.call_from_thread(self.analysed, analysis)

    def _take_chunk(self, chunk: Chunk) -> None:
        unknown = self.findings_timeline.at(self.monitor.t) is None
        self.findings_timeline.extend(chunk)
        if self.training and self._first_firing is None:
            evaluations = zip(chunk.times, chunk.findings, strict=True)
            fired = (t for t, found in evaluations if any(f.state == "firing" for f in found))
            self._first_firing = next(fired, None)
        stop = self._stop_at()
        if self._held and stop is not None and stop > self.player.position + 1e-6:
            self._held = False  # the pass has read further: the replay goes on
            self.replay.play()
            self._schedule()
        if unknown and self.findings_timeline.at(self.monitor.t) is not None:
            self.refresh_view()
            return
        if self.training and self.session is None:
            self.triage.show(self._training_lines())  # how far, while nothing else moves
        elif unknown and not self.training:
            self.triage.show([self._computing_line()])
        self._show_timeline()

    def analysed(self, analysis: Analysis) -> None:
        """The pass is over: marks, questions, and findings everywhere."""
        self.analysis = analysis
        self.findings_timeline.complete = True
        if self.training:
            self.session = Session(analysis.questions)
            self.replay.set_marks([(q.t, "incident") for q in analysis.questions])
            if self.autoplay and (self._held or not self._started):
                self.replay.play()
            self._held = False
        else:
            self.replay.set_marks(analysis.marks)
        self.refresh_view()
        self._schedule()
        self._after_move()

    def _findings_at(self, monitor: Monitor, endpoint: str) -> Sequence[Finding] | None:
        if self.training:
            return ()
        return self.findings_timeline.at(monitor.t, endpoint)
