"""A finding's predicted effect for the screens, in two halves: one for the loop, one for a
worker thread (no Textual here).

The twin takes about a second, so it cannot run on Textual's event loop (the screen would
freeze); the store, though, is fed on that loop and must be read there. `Predictor.start` reads
the store at once (`Advisor.read`, milliseconds) and hands back a job that runs the twin on
what was read (`Advisor.advise`) and returns what to show; a screen runs the job on a thread
worker. The job never raises: a twin that fails says so in one row, and the screen stays up.
One `Predictor` per app, so its `Advisor` keeps the fits and the answers, and a second look at
the same finding under the same load is instant; a lock keeps its runs to one at a time, as
`Advisor.advise` requires, even when two screens started jobs.

The twin may choose another value than the rule's formula (`--max-num-seqs 36` where the
formula gave 64). From then on every view says the twin's: the detail's Change box, the triage
panel's arrow and what `c` copies (`shown`), as the reports do, for as long as the rule asks
for the same moves (the same knobs, the same directions): its formula's value moves with the
load from poll to poll (64, then 72), the twin's search does not start from it, and a panel
that went back to the formula's value at each such step would flip between two answers. The
twin is asked about the formula's own recommendations still (`formula`), never about its own
earlier answer.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from vtop.model import Finding, Recommendation
from vtop.monitor import Monitor
from vtop.ui.views.detail import Row, prediction_rows, unavailable_rows
from vtop.ui.views.findings import FindingsProvider
from vtop.whatif.advice import (
    Advice,
    Advisor,
    Reading,
    chosen_recommendations,
    prediction_reading,
    twin_changes,
    twin_failed,
)
from vtop.whatif.goals import Goals


@dataclass(frozen=True, slots=True)
class Predicted:
    """What a screen shows once the twin is done (or could not start)."""

    rows: list[Row]
    """The predicted-effect block (none: nothing to predict; one: why not)."""
    finding: Finding
    """The finding with the recommendations the twin chose (the finding itself without)."""


Job = Callable[[], Predicted]
"""The twin's run, for a worker thread."""


Moves = tuple[tuple[str, str], ...]


def _moves(recommendations: tuple[Recommendation, ...]) -> Moves:
    """What a rule asks for, whatever its formula's values: each knob and its direction."""
    return tuple((r.knob, r.direction) for r in recommendations)


class Predictor:
    """The app's `Advisor`, read on the loop and run off it, one run at a time."""

    def __init__(self, goals: Goals | None = None) -> None:
        self._advisor = Advisor(goals)
        self._lock = threading.Lock()
        self._advice: dict[tuple[str, str], tuple[Moves, Advice]] = {}
        """(endpoint, rule) -> what the rule asked for and the twin's latest answer to it
        (written on the worker, read on the loop)."""
        self._shown: dict[
            tuple[str, str], tuple[tuple[Recommendation, ...], tuple[Recommendation, ...]]
        ] = {}
        """(endpoint, rule) -> the recommendations `shown` last gave in place of the rule's
        own, and those (`formula` maps the one back to the other)."""

    def start(self, monitor: Monitor, finding: Finding) -> Predicted | Job:
        """On the loop: what to show now (nothing to predict, or why not), or the job that
        runs the twin on what the store holds now (read as the report and the text quiz read
        it: `vtop.whatif.advice.prediction_reading`)."""
        asked = self.formula(finding)
        if not twin_changes(asked):
            return Predicted([], finding)
        reading = prediction_reading(monitor.watched(asked.endpoint), asked)
        if isinstance(reading, str):
            return Predicted(unavailable_rows(reading), finding)
        return lambda: self._run(asked, reading)

    def shown(self, finding: Finding) -> Finding:
        """`finding` (as its rule gives it) with the twin's choice, where the twin answered
        the same moves; `finding` itself otherwise."""
        key = (finding.endpoint, finding.rule)
        kept = self._advice.get(key)
        if kept is None or kept[0] != _moves(finding.recommendations):
            return finding
        chosen = chosen_recommendations(finding, kept[1])
        if chosen == finding.recommendations:
            return finding
        self._shown[key] = (chosen, finding.recommendations)
        return replace(finding, recommendations=chosen)

    def showing(self, provider: FindingsProvider) -> FindingsProvider:
        """`provider` with each finding as `shown` gives it: what the screen lists."""

        def findings(monitor: Monitor, endpoint: str) -> Sequence[Finding] | None:
            found = provider(monitor, endpoint)
            return None if found is None else tuple(self.shown(f) for f in found)

        return findings

    def formula(self, finding: Finding) -> Finding:
        """`finding` with its rule's own recommendations, where `shown` gave it the twin's."""
        shown = self._shown.get((finding.endpoint, finding.rule))
        if shown is None or shown[0] != finding.recommendations:
            return finding
        return replace(finding, recommendations=shown[1])

    def _run(self, finding: Finding, reading: Reading) -> Predicted:
        """On a worker thread: the twin's rows and choice, or the one row that says why not."""
        try:
            with self._lock:
                advice = self._advisor.advise(finding, reading)
        except Exception as exc:  # a worker that raises would close the app
            return Predicted(unavailable_rows(twin_failed(exc)), finding)
        key = (finding.endpoint, finding.rule)
        if advice is None:
            self._advice.pop(key, None)
        else:
            self._advice[key] = (_moves(finding.recommendations), advice)
        chosen = chosen_recommendations(finding, advice)
        if chosen != finding.recommendations:
            finding = replace(finding, recommendations=chosen)
        return Predicted(prediction_rows(advice), finding)
