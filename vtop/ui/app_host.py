"""What the live dashboard's parts share: its state and the methods one part calls on another.

`VtopApp` is put together from mixins, one concern each (`app_layout`, `app_drawing`,
`app_polling`, `app_recording`, `app_keys`), so that no module has to hold the whole screen.
The mixins are plain classes at run time: Textual then sees exactly the class tree it saw when
the app was one class (the same CSS bases, type names and bindings), and finds their `on_…`
handlers and `action_…` methods through the MRO as before. For the type checker, each of them
stands on `DashboardHost`, declared here only under `TYPE_CHECKING`: the app's attributes and
the few methods one mixin calls on another, so every call across them is checked against the
one contract, and `VtopApp.__init__` is where the attributes get their values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable
    from pathlib import Path

    from textual.app import App

    from vtop.monitor import Monitor
    from vtop.sources.base import FrameSource
    from vtop.sources.pacing import Pacer
    from vtop.sources.status import ConnectionStatus
    from vtop.trace.recorder import Recorder
    from vtop.ui.prediction import Predictor
    from vtop.ui.views.findings import FindingsProvider
    from vtop.ui.views.panels import View
    from vtop.ui.views.thresholds import Table
    from vtop.ui.widgets.endpoint_list import EndpointList
    from vtop.ui.widgets.gpu_panel import GpuPanel
    from vtop.ui.widgets.header_bar import HeaderBar
    from vtop.ui.widgets.scheduler_grid import SchedulerGrid
    from vtop.ui.widgets.triage_panel import TriagePanel

    class DashboardHost(App[None]):
        """The dashboard as its mixins see it (type checking only)."""

        source: FrameSource
        monitor: Monitor
        window_s: float
        paused: bool
        selected: int
        thresholds: Table
        predictor: Predictor
        record_dir: Path
        recorder: Recorder | None
        header: HeaderBar
        endpoint_list: EndpointList
        triage: TriagePanel
        grid: SchedulerGrid
        gpus: GpuPanel
        _pacer: Pacer
        _findings: FindingsProvider
        _self_cpu: Callable[[], float | None]
        _autopoll: bool
        _timer: asyncio.TimerHandle | None
        _polling: asyncio.Task[None] | None
        _repaint: asyncio.TimerHandle | None
        _poll_started: float | None
        _poll_failures: int

        @property
        def interval(self) -> float: ...
        @interval.setter
        def interval(self, seconds: float) -> None: ...
        @property
        def endpoints(self) -> list[str]: ...
        @property
        def endpoint(self) -> str | None: ...
        def current_view(self) -> View | None: ...
        def _status(self, endpoint: str) -> ConnectionStatus: ...
        def _show_header(self) -> None: ...
        def refresh_view(self) -> None: ...
        def _choose_layout(self) -> None: ...
        def _follow_terminal_size(self) -> None: ...
        def _arm(self, delay: float) -> None: ...
        def _stop_recording(self) -> None: ...
        def action_record(self) -> None: ...

else:
    DashboardHost = object
