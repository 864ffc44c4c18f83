"""Where the screen gets each endpoint's findings: the one switch point to the triage engine.

The triage engine will attach its findings to the monitor's endpoint views. Until it lands,
`monitor_findings` reads them from there if present and finds none otherwise; tests and
other front ends pass their own provider to the app. When the engine's API is settled, this
function is the only code to change.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from vtop.model import Finding
from vtop.monitor import Monitor

FindingsProvider = Callable[[Monitor, str], Sequence[Finding]]


def monitor_findings(monitor: Monitor, endpoint: str) -> Sequence[Finding]:
    """The findings the monitor holds for `endpoint` (none before the triage engine lands)."""
    view = monitor.endpoints.get(endpoint)
    found = getattr(view, "findings", None) if view is not None else None
    if found is None:
        return ()
    return tuple(found)
