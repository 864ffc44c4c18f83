"""The twin's run as a screen sees it: started on a thread worker, its end turned into rows.

The finding detail and the training reveal both show a finding's predicted effect; the twin
runs off the loop (`vtop.ui.prediction`), and both read its worker's end the same way.
"""

from __future__ import annotations

from typing import Any

from textual.screen import Screen
from textual.worker import Worker, WorkerState

from vtop.model import Finding
from vtop.ui.prediction import Job, Predicted
from vtop.ui.views.detail import unavailable_rows

GROUP = "predict"
"""The worker group of the twin's run."""


def run(screen: Screen[Any], job: Job) -> None:
    """Run the twin's `job` on a thread worker of `screen` (one at a time)."""
    screen.run_worker(job, thread=True, exclusive=True, group=GROUP)


def ended(event: Worker.StateChanged, finding: Finding) -> Predicted | None:
    """What to show when the twin's worker for `finding` ended (its answer, or why there is
    none); None for any other worker or state."""
    worker = event.worker
    if worker.group != GROUP:
        return None
    if event.state == WorkerState.SUCCESS and isinstance(worker.result, Predicted):
        return worker.result
    if event.state == WorkerState.ERROR:
        return Predicted(unavailable_rows(f"the twin failed ({worker.error})"), finding)
    return None
