"""A finding's predicted effect for the screens, in two halves: one for the loop, one for a
worker thread (no Textual here).

The twin takes about a second, so it cannot run on Textual's event loop (the screen would
freeze); the store, though, is fed on that loop and must be read there. `Predictor.start` reads
the store at once (`Advisor.read`, milliseconds) and hands back a job that runs the twin on
what was read (`Advisor.advise`) and returns the rows to show; a screen runs the job on a
thread worker. The job never raises: a twin that fails says so in one row, and the screen
stays up. One `Predictor` per app, so its `Advisor` keeps the fits and the answers, and a
second look at the same finding under the same load is instant; a lock keeps its runs to one
at a time, as `Advisor.advise` requires, even when two screens started jobs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from vtop.model import Finding
from vtop.monitor import Monitor
from vtop.ui.views.detail import Row, prediction_rows, unavailable_rows
from vtop.whatif.advice import Advisor, Reading, prediction_reading, twin_changes, twin_failed
from vtop.whatif.search import Goals

Job = Callable[[], list[Row]]
"""The twin's run, for a worker thread: the rows to show when it is done."""


class Predictor:
    """The app's `Advisor`, read on the loop and run off it, one run at a time."""

    def __init__(self, goals: Goals | None = None) -> None:
        self._advisor = Advisor(goals)
        self._lock = threading.Lock()

    def start(self, monitor: Monitor, finding: Finding) -> list[Row] | Job:
        """On the loop: the rows to show now (none: nothing to predict; one: why not), or the
        job that runs the twin on what the store holds now (read as the report and the text
        quiz read it: `vtop.whatif.advice.prediction_reading`)."""
        if not twin_changes(finding):
            return []
        reading = prediction_reading(monitor.watched(finding.endpoint), finding)
        if isinstance(reading, str):
            return unavailable_rows(reading)
        return lambda: self._run(finding, reading)

    def _run(self, finding: Finding, reading: Reading) -> list[Row]:
        """On a worker thread: the twin's rows, or the one row that says why there are none."""
        try:
            with self._lock:
                advice = self._advisor.advise(finding, reading)
        except Exception as exc:  # a worker that raises would close the app
            return unavailable_rows(twin_failed(exc))
        return prediction_rows(advice)
