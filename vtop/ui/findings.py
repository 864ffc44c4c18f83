"""Where the screen gets each endpoint's findings: the one switch point to the triage engine.

The triage engine will attach its findings to the monitor's endpoint views. Until it lands,
`monitor_findings` reads them from there if present and says `None` ("no triage here", which
the screen shows as such rather than as "all clear"); tests and other front ends pass their
own provider to the app. When the engine's API is settled, this function is the only code to
change.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from vtop.model import Finding
from vtop.monitor import Monitor

FindingsProvider = Callable[[Monitor, str], Sequence[Finding] | None]
"""The findings of one endpoint; None when no triage engine evaluates it."""


def monitor_findings(monitor: Monitor, endpoint: str) -> Sequence[Finding] | None:
    """The findings the monitor holds for `endpoint`; None before the triage engine lands."""
    view = monitor.endpoints.get(endpoint)
    found = getattr(view, "findings", None) if view is not None else None
    return None if found is None else tuple(found)
