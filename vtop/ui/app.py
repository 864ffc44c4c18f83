"""The live dashboard: any `FrameSource` polled into a `Monitor`, drawn by Textual.

The app knows nothing about where frames come from: live endpoints, the simulator and a trace
being replayed all arrive through `FrameSource.poll()`, and all numbers come from the
`Monitor`, so `--url`, `--demo` and `--replay` share this code unchanged.

Cost is designed in, because the screen is meant to stay open all day over SSH:
- one one-shot timer, re-armed after each poll completes, so polls never overlap and nothing
  ticks between them (no per-frame timers, no animations, no clock in the header);
- the screen is redrawn only when a frame arrives (or a key changes what is shown), and only
  the fields whose text changed are repainted (`FieldsWidget`): a new token rate repaints a
  dozen cells, not its panel;
- charts are drawn over fixed time buckets and recomputed only when a bucket completes;
- time on screen comes from the frames, never from the wall clock;
- between polls nothing wakes: Textual's input thread sleeps until a key comes
  (`vtop.ui.driver`), and the host is read only while a recording wants it.

The UI owns all its state (selected endpoint, window, pause); widgets get data pushed down
and send messages up. This module holds the app's state, layout and lifecycle; what it does is
in one mixin per concern: `app_layout` (the terminal's size), `app_drawing` (the widgets),
`app_polling` (the poll loop), `app_recording` (`r`) and `app_keys` (the other keys);
`app_host` says how they fit.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ClassVar

from textual import events
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.driver import Driver
from textual.filter import LineFilter, Monochrome, NoColor
from textual.notifications import SeverityLevel
from textual.widgets import Footer, Input

from vtop import untrusted
from vtop.exits import ExitCode
from vtop.monitor import Monitor
from vtop.sources.base import FrameSource, sample_host, warms_up
from vtop.sources.pacing import WARM_UP_S, Pacer
from vtop.trace.recorder import Recorder
from vtop.ui.app_drawing import DrawingMixin
from vtop.ui.app_keys import INTERVALS, WINDOWS, KeysMixin
from vtop.ui.app_layout import LayoutMixin
from vtop.ui.app_polling import PollingMixin
from vtop.ui.app_recording import RecordingMixin
from vtop.ui.prediction import Predictor
from vtop.ui.views.findings import FindingsProvider, monitor_findings
from vtop.ui.views.thresholds import Table, table_for
from vtop.ui.widgets.endpoint_list import EndpointList
from vtop.ui.widgets.gpu_panel import GpuPanel
from vtop.ui.widgets.header_bar import HeaderBar
from vtop.ui.widgets.scheduler_grid import SchedulerGrid
from vtop.ui.widgets.triage_panel import TriagePanel
from vtop.whatif.goals import Goals

__all__ = ["INTERVALS", "THEMES", "WINDOWS", "ProcessCpu", "SelfCpu", "VtopApp"]

THEMES = {"dark": "textual-dark", "light": "textual-light"}
COST_EVERY_S = 10.0
"""vtop's own CPU% is measured over this span: a steadier number, and fewer repaints."""

SelfCpu = Callable[[], float | None]


class ProcessCpu:
    """vtop's own CPU, in percent of one core, from `time.process_time()` deltas."""

    def __init__(self) -> None:
        self._last = (time.monotonic(), time.process_time())
        self.value: float | None = None

    def __call__(self) -> float | None:
        wall, cpu = time.monotonic(), time.process_time()
        dt = wall - self._last[0]
        if dt >= COST_EVERY_S or (self.value is None and dt >= 2.0):
            self.value = 100.0 * (cpu - self._last[1]) / dt
            self._last = (wall, cpu)
        return self.value


_NO_COLOR = NoColor()


class VtopApp(KeysMixin, RecordingMixin, PollingMixin, DrawingMixin, LayoutMixin, App[None]):
    """vtop's terminal dashboard."""

    CSS_PATH = "vtop.tcss"
    TITLE = "vtop"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide")]  # noqa: RUF012 (Textual's type)
    VERTICAL_BREAKPOINTS = [(0, "-short"), (34, "-tall")]  # noqa: RUF012
    ENABLE_COMMAND_PALETTE = True

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "help", "Help"),
        Binding("p", "pause", "Pause"),
        Binding("plus,equals_sign", "interval(-1)", "Faster", show=False),
        Binding("minus", "interval(1)", "Slower", show=False),
        Binding("w", "window", "Window"),
        Binding("e", "explain", "Explain"),
        Binding("c", "copy", "Copy flags"),
        Binding("b", "engines", "Engines", show=False),
        Binding("r", "record", "Record", show=False),
        Binding("q", "quit", "Quit"),
        *(Binding(str(n), f"choose({n - 1})", show=False) for n in range(1, 10)),
    ]

    def __init__(
        self,
        source: FrameSource,
        monitor: Monitor,
        *,
        interval: float = 1.0,
        window_s: float = 300.0,
        theme: str = "dark",
        findings: FindingsProvider | None = None,
        thresholds: Table | None = None,
        self_cpu: SelfCpu | None = None,
        autopoll: bool = True,
        record_dir: str | os.PathLike[str] = ".",
        recorder: Recorder | None = None,
        goals: Goals | None = None,
    ) -> None:
        """`recorder`: record every frame from the first poll (`vtop --record FILE` on a
        terminal); `r` stops it like a recording started here. `goals`: what the twin's
        choice of each finding's setting optimises (`--max-ttft-s` and the others)."""
        super().__init__()
        self.source = source
        self.monitor = monitor
        self._pacer = Pacer(interval, warm_up_s=WARM_UP_S if warms_up(source) else 0.0)
        self.window_s = window_s
        self.paused = False
        self.selected = 0
        self.predictor = Predictor(goals)
        """Findings' predicted effects, kept while the load holds (one `Advisor` per app)."""
        self._findings = self.predictor.showing(findings or monitor_findings)
        self.thresholds = thresholds if thresholds is not None else table_for(monitor.engine.rules)
        self._self_cpu = self_cpu or ProcessCpu()
        self._autopoll = autopoll
        self._timer: asyncio.TimerHandle | None = None
        self._polling: asyncio.Task[None] | None = None
        self._repaint: asyncio.TimerHandle | None = None
        self._poll_started: float | None = None
        self._poll_failures = 0
        self.record_dir = Path(record_dir)
        self.recorder: Recorder | None = recorder
        name = THEMES.get(theme, theme)
        if name not in self.available_themes:
            known = ", ".join(["dark", "light", *sorted(self.available_themes)])
            raise ValueError(f"unknown theme {theme!r}; choose one of: {known}")
        self.theme = name
        self.header = HeaderBar()
        self.endpoint_list = EndpointList()
        self.triage = TriagePanel()
        self.grid = SchedulerGrid()
        self.gpus = GpuPanel()

    def get_line_filters(self) -> Sequence[LineFilter]:
        """Textual's filters, but NO_COLOR means no colour at all (no-color.org): Textual's own
        answer to it paints in greys, which are colours to a terminal; this one leaves every
        cell in the terminal's default colours, with bold, dim and reverse still there for
        emphasis (severity is spelled out in words everywhere, not only coloured)."""
        return [_NO_COLOR if isinstance(f, Monochrome) else f for f in super().get_line_filters()]

    def get_driver_class(self) -> type[Driver]:
        """Textual's driver for this terminal; its Linux one swapped for `QuietLinuxDriver`
        (unless TEXTUAL_DRIVER names a driver: then that one, as Textual would)."""
        driver = super().get_driver_class()
        if sys.platform == "win32" or os.environ.get("TEXTUAL_DRIVER"):
            return driver
        from textual.drivers.linux_driver import LinuxDriver

        if driver is not LinuxDriver:
            return driver
        try:
            from vtop.ui import driver as quiet
        except Exception:  # a Textual without the parts it builds on: Textual's own driver
            return driver
        return driver if quiet.mismatch() is not None else quiet.QuietLinuxDriver

    # -- layout ----------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield self.header
        yield self.endpoint_list
        yield self.triage
        yield self.grid
        yield self.gpus
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.end_on_signals()
        self.triage.focus()
        self.notify_rule_errors(self.monitor.engine.errors)
        self._choose_layout()
        self.refresh_view()
        self.call_after_refresh(self._choose_layout)  # with the other widgets' heights
        # What is alive once the screen is up (modules, widgets, styles: ~90k objects) lives
        # as long as the app; frozen, the collector stops walking it in every full collection
        # (80 ms each, about a tenth of what vtop spends in a minute at 1 Hz).
        self.call_after_refresh(gc.freeze)
        # A poll allocates a few thousand short-lived objects, nearly all freed by reference
        # counting; the default threshold (700) still ran a young collection on every poll.
        gc.set_threshold(20_000, *gc.get_threshold()[1:])
        # Host readings are for recordings: read from `r` on, or now for `--record`.
        sample_host(self.source, self.recorder is not None)
        if self.recorder is not None:
            self.notify(
                f"recording to {self.recorder.path} (r stops)", title="recording", timeout=5
            )
        if self._autopoll:
            self._arm(0.0)

    def end_on_signals(self) -> None:
        """SIGTERM, and SIGHUP (the terminal or the SSH session closing), end the app as `q`
        does instead of killing it: a recording is closed with its footer and the terminal is
        given back as it was found (no alternate screen, raw mode or mouse reports left on)."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self._end_on_signal, sig)

    def _end_on_signal(self, sig: signal.Signals) -> None:
        """A hangup exits with `ExitCode.HANGUP` (128 + SIGHUP), as when the driver finds the
        terminal gone without one (`vtop.ui.driver`): nothing is printed after the screen then.
        SIGTERM is a request to stop, answered as `q` is: OK."""
        self._stop_recording()  # first: the terminal may be gone, the file is not
        self.exit(return_code=ExitCode.HANGUP if sig == signal.SIGHUP else ExitCode.OK)

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Textual's toast, for words that may be anyone's (a failed poll quotes the server, a
        rule error its file): drawn as the text they are, not as markup (`[@click=app.quit]`
        would be a link, a stray `[/x]` an error), and without a control or bidi character
        (`vtop.untrusted`; lines kept)."""
        super().notify(
            untrusted.block(message),
            title=untrusted.clean(title, 200),
            severity=severity,
            timeout=timeout,
            markup=markup,
        )

    def notify_rule_errors(self, errors: Sequence[object]) -> None:
        """Rule files that did not load, a line each (file:line: rule-id: what), on screen:
        the lines printed before the screen opened are hidden behind it."""
        if errors:
            self.notify(
                "\n".join(str(e) for e in errors),
                severity="warning",
                timeout=20,
                title=f"{len(errors)} rule(s) skipped; the others run",
            )

    async def on_unmount(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._polling is not None:
            self._polling.cancel()
        if self._repaint is not None:
            self._repaint.cancel()
        self._stop_recording()
        await self.source.aclose()

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        if isinstance(event.widget, Input):
            event.widget.cursor_blink = False  # deterministic screenshots, calmer terminals
