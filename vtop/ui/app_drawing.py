"""The dashboard's drawing: the monitor's state pushed into the header, fleet, verdict, panels.

All of it in one place, run when a frame arrives or a key changes what is shown, never on a
clock: each widget repaints only the fields whose text changed, so a redraw after every poll
costs the cells that moved. The replay overrides `_status` (the trace's time) and extends
`refresh_view` (timeline, training). A mixin of `VtopApp` (`vtop.ui.app_host` says how the
parts fit).
"""

from __future__ import annotations

from dataclasses import replace

from vtop import durations, figures, fmt
from vtop.monitor import EndpointView
from vtop.sources.status import UNKNOWN, ConnectionStatus
from vtop.ui import fleet, verdict
from vtop.ui.app_host import DashboardHost
from vtop.ui.headline import headline
from vtop.ui.panels import View
from vtop.ui.screens.engines import EnginesScreen


class DrawingMixin(DashboardHost):
    """The selected endpoint, its view, and `refresh_view`, which draws them."""

    @property
    def endpoints(self) -> list[str]:
        return list(self.monitor.endpoints)

    @property
    def endpoint(self) -> str | None:
        """The endpoint the panels show."""
        eps = self.endpoints
        return eps[min(self.selected, len(eps) - 1)] if eps else None

    def current_view(self) -> View | None:
        ep = self.endpoint
        if ep is None:
            return None
        ev = self.monitor.endpoints[ep]
        return View(ev.store, ev.knobs, self.window_s, self.interval, thresholds=self.thresholds)

    def _status(self, endpoint: str) -> ConnectionStatus:
        try:
            return self.source.status(endpoint)
        except Exception:
            return UNKNOWN

    def _show_header(self) -> None:
        ep = self.endpoint
        head = None
        if ep is not None:
            head = headline(self.monitor.endpoints[ep], self._status(ep), self.thresholds)
            if len(self.endpoints) > 1:
                where = f"{head.endpoint} ({self.selected + 1}/{len(self.endpoints)})"
                head = replace(head, endpoint=where)
        cadence = f"{fmt.interval(self.interval)} · {durations.exact(self.window_s)}"
        if self.paused:
            cadence = "⏸ paused · " + cadence
        if self.recorder is not None and self.recorder.active:
            cadence = "⏺ rec · " + cadence
        cpu = self._self_cpu()
        cost = f"vtop {cpu:.1f}%" if cpu is not None else "vtop –"
        self.header.show(head, cadence=cadence, cost=cost)

    def refresh_view(self) -> None:
        """Push the monitor's state into every widget (each repaints only what changed)."""
        self._show_header()
        eps = self.endpoints
        ep = self.endpoint
        if len(eps) > 1:
            rate_span_s = figures.rate_span(self.interval)
            quickest = self.monitor.engine.quickest_s
            rows = [
                fleet.row(
                    self.monitor.endpoints[e],
                    self._findings(self.monitor, e),
                    self._status(e),
                    rate_span_s,
                    quickest,
                )
                for e in eps
            ]
            self.endpoint_list.show(rows, self.selected)
        if self.endpoint_list.display != (len(eps) > 1):
            self.endpoint_list.display = len(eps) > 1
        view = self.current_view()
        if ep is not None and view is not None:
            ev: EndpointView = self.monitor.endpoints[ep]
            error = ev.last.error if ev.last is not None and not ev.last.ok else None
            self.triage.show(
                verdict.lines(
                    self._findings(self.monitor, ep),
                    error=error,
                    polls=ev.store.polls,
                    watched_s=fleet.watched(ev.store),
                    quickest_s=self.monitor.engine.quickest_s,
                )
            )
            self.grid.show(view)
            if isinstance(self.screen, EnginesScreen):
                self.screen.show(view)
        else:
            self.triage.show([verdict.Line("info", "connecting…", label="…")])
        title = f"Scheduler · {durations.exact(self.window_s)}"
        if self.grid.border_title != title:
            self.grid.border_title = title  # a new title repaints the whole widget: on change
        local = [e.local for e in self.monitor.endpoints.values()]
        self.gpus.show(
            self.monitor.gpus, remote_only=bool(local) and not any(local), table=self.thresholds
        )
        self._choose_layout()  # the GPU lines or the endpoints' rows may have changed
