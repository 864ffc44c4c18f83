"""Where the screen gets each endpoint's findings: the monitor's, which the triage engine sets.

The monitor runs the triage engine after every scrape (`EndpointView.findings`); the screen
reads them from there. A provider is a seam, not a second path: tests pass scripted findings
through it, and a provider may answer `None` for "no triage here", which the screen shows as
such rather than as "all clear".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from vtop.model import Finding
from vtop.monitor import Monitor

FindingsProvider = Callable[[Monitor, str], Sequence[Finding] | None]
"""The findings of one endpoint; None when no triage engine evaluates it."""


def monitor_findings(monitor: Monitor, endpoint: str) -> Sequence[Finding] | None:
    """The findings the monitor holds for `endpoint` (None for an endpoint it does not know)."""
    view = monitor.endpoints.get(endpoint)
    return None if view is None else tuple(view.findings)
