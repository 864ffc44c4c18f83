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
and send messages up.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

from textual import events
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.driver import Driver
from textual.filter import LineFilter, Monochrome, NoColor
from textual.geometry import Size
from textual.screen import Screen
from textual.widgets import Footer, Input

from vtop import durations, fmt
from vtop.model import Frame
from vtop.monitor import EndpointView, Monitor
from vtop.sources.base import FrameSource, pace, retime, sample_host, warms_up
from vtop.sources.pacing import WARM_UP_S, Pacer
from vtop.sources.status import UNKNOWN, ConnectionStatus
from vtop.trace.recorder import Recorder
from vtop.trace.writer import TraceWriteError
from vtop.ui import fleet, osc52, panels, verdict
from vtop.ui.findings import FindingsProvider, monitor_findings
from vtop.ui.headline import headline
from vtop.ui.panels import View
from vtop.ui.screens.engines import EnginesScreen
from vtop.ui.screens.explain import ExplainScreen, explain_text
from vtop.ui.screens.finding import FindingScreen
from vtop.ui.screens.help import HelpScreen
from vtop.ui.thresholds import Table, table_for
from vtop.ui.widgets.endpoint_list import EndpointList
from vtop.ui.widgets.gpu_panel import GpuPanel
from vtop.ui.widgets.header_bar import HeaderBar
from vtop.ui.widgets.panel_column import PanelColumn
from vtop.ui.widgets.scheduler_grid import SchedulerGrid
from vtop.ui.widgets.triage_panel import TriagePanel

WINDOWS = (60.0, 300.0, 900.0, 3600.0)
INTERVALS = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
THEMES = {"dark": "textual-dark", "light": "textual-light"}
COST_EVERY_S = 10.0
"""vtop's own CPU% is measured over this span: a steadier number, and fewer repaints."""
RESIZE_SETTLE_S = 0.05
"""Quiet time after the last resize of a burst before the full repaint."""
ROOMY_MIN_W = 100
"""The narrowest screen for the grid of boxed panels (three columns of 32)."""
ROOMY_ROWS = 15
"""Rows the grid of boxed panels needs: three rows of boxes with a value, a chart and a note
(and the statistics from 18)."""
TALL_H = 34
"""From this height the boxed panels are used at any content (`VERTICAL_BREAKPOINTS`)."""

SelfCpu = Callable[[], float | None]

TRIAGE_HELP = (
    "Each rule of the triage engine watches a condition over the window. A finding is "
    "pending while its condition holds and its evidence accrues (shown as "
    "'rule: 8 of 15 s'), firing once the evidence is in, and suppressed when a root "
    "cause already explains it (then it gives no advice, so vtop never says 'raise "
    "max_num_seqs' while the KV cache is the wall). While nothing fires, the likely "
    "cause leads ('? likely budget-too-small · 8 of 15 s'), with no advice: flags come "
    "with the verdict. Enter opens a finding: its evidence, "
    "and each recommended flag with the formula and the inputs it was computed from, "
    "each input with where it came from. c copies the flags."
)


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


class VtopApp(App[None]):
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
    ) -> None:
        """`recorder`: record every frame from the first poll (`vtop --record FILE` on a
        terminal); `r` stops it like a recording started here."""
        super().__init__()
        self.source = source
        self.monitor = monitor
        self._pacer = Pacer(interval, warm_up_s=WARM_UP_S if warms_up(source) else 0.0)
        self.window_s = window_s
        self.paused = False
        self.selected = 0
        self._findings = findings or monitor_findings
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
            self.notify(f"recording to {self.recorder.path} (r stops)", title="recording",
                        timeout=5)  # fmt: skip
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
        """A hangup exits with 129 (128 + SIGHUP), as when the driver finds the terminal gone
        without one (`vtop.ui.driver`): nothing is printed after the screen then."""
        self._stop_recording()  # first: the terminal may be gone, the file is not
        self.exit(return_code=128 + sig if sig == signal.SIGHUP else 0)

    def notify_rule_errors(self, errors: Sequence[object]) -> None:
        """Rule files that did not load, a line each (file:line: rule-id: what), on screen:
        the lines printed before the screen opened are hidden behind it."""
        if errors:
            self.notify("\n".join(str(e) for e in errors), severity="warning", timeout=20,
                        title=f"{len(errors)} rule(s) skipped; the others run")  # fmt: skip

    async def on_unmount(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._polling is not None:
            self._polling.cancel()
        if self._repaint is not None:
            self._repaint.cancel()
        self._stop_recording()
        await self.source.aclose()

    def on_resize(self, event: events.Resize) -> None:
        """Repaint the whole screen once a burst of terminal resizes has settled.

        Textual coalesces a burst of resizes and skips one that ends at the size it last
        drew, as if the terminal had kept the picture; but a terminal (tmux, xterm) drops what
        a smaller size cut off. Without this, 200×60 → 80×24 → 200×60 in one drag left the
        GPU panel and the footer blank until their text changed: the footer's never does."""
        if self._repaint is not None:
            self._repaint.cancel()
        self._repaint = asyncio.get_running_loop().call_later(RESIZE_SETTLE_S, self._repaint_all)
        self._choose_layout()

    def _repaint_all(self) -> None:
        self._repaint = None
        if self.is_running:
            self._choose_layout()
            self.refresh()
            self._follow_terminal_size()

    def _follow_terminal_size(self) -> None:
        """Catch up with a resize that got lost in a storm of them.

        On a loaded machine the last SIGWINCH of a burst can go unseen, and the app then
        draws for a size the terminal no longer has until the next resize. One ioctl after
        each burst and each poll finds that out; a `Resize` like the driver's puts it right.
        """
        if self.is_headless or sys.__stdout__ is None:
            return
        try:
            width, height = os.get_terminal_size(sys.__stdout__.fileno())
        except (OSError, ValueError):
            return
        if (width, height) != (self.size.width, self.size.height):
            size = Size(width, height)
            self.post_message(events.Resize(size, size))

    def _choose_layout(self) -> None:
        """Compact (a row per panel) or roomy (boxed panels): roomy where the screen is wide
        enough and the boxes fit under the rest, with the verdict at its short height.

        The size classes alone put 100×30 in the compact layout, whose nine rows left eight
        empty ones under the GPU; the boxes fit there, with their statistics. Counted from
        what the rest takes (GPU lines, endpoints, a replay's timeline) and the verdict's
        cap, not its lines now, so a longer diagnosis does not flip the layout.
        """
        screen = self.screen_stack[0] if self.screen_stack else None
        width, height = self.size
        if screen is None or width <= 0 or height <= 0:
            return
        compact = width < ROOMY_MIN_W
        if not compact and height < TALL_H:
            cap = self.triage.styles.max_height
            triage = int(cap.value) if cap is not None and cap.is_cells else 10
            rest = sum(w.outer_size.height for w in screen.children
                       if w.display and w not in (self.triage, self.grid)
                       and not (w.styles.layer or "").startswith("_"))  # fmt: skip
            compact = height - rest - triage < ROOMY_ROWS
        if screen.has_class("-compact") != compact:
            screen.set_class(compact, "-compact")
            self.grid.assign()

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        if isinstance(event.widget, Input):
            event.widget.cursor_blink = False  # deterministic screenshots, calmer terminals

    # -- polling ---------------------------------------------------------------------------------

    @property
    def interval(self) -> float:
        """Seconds between polls once the first seconds' warm-up is over (`Pacer`)."""
        return self._pacer.interval_s

    @interval.setter
    def interval(self, seconds: float) -> None:
        self._pacer.interval_s = seconds

    def _arm(self, delay: float) -> None:
        """One one-shot timer for the next poll; re-armed only when a poll has finished.

        A plain event-loop timer and task, not a Textual `Timer` or worker: creating one of
        those costs a tenth of a millisecond or more on every poll (a worker also posts three
        state messages), and a zero-delay `Timer` divides by zero.
        """
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_later(max(0.0, delay), self._start_poll)

    def _start_poll(self) -> None:
        self._timer = None
        self._polling = asyncio.create_task(self._poll())

    async def _poll(self) -> None:
        started = time.monotonic()
        self._poll_started = started
        after = self.interval
        try:
            frame = await self.source.poll()
            self.ingest(frame)
            self._poll_failures = 0
            # Faster for the first seconds after attaching, where the server answers fast.
            after = self._pacer.next_after(frame)
            pace(self.source, after)
        except Exception as exc:  # a source or view bug must not kill the screen, nor polling
            self._poll_failures += 1
            if self._poll_failures == 1:
                self.notify(f"poll failed: {exc}", severity="error", timeout=10)
        self._follow_terminal_size()
        if self._autopoll and self.is_running:
            self._arm(after - (time.monotonic() - started))

    def ingest(self, frame: Frame) -> None:
        """Feed one frame to the monitor (and the recorder) and redraw (unless paused)."""
        self.monitor.feed(frame)
        if self.recorder is not None:
            self.recorder.feed(frame)
        if self.paused:
            self._show_header()
        else:
            self.refresh_view()

    # -- drawing ---------------------------------------------------------------------------------

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
        return View(ev.store, ev.knobs, self.window_s, self.interval,
                    thresholds=self.thresholds)  # fmt: skip

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
            recent = panels.recent_span(self.interval)
            rows = [fleet.row(self.monitor.endpoints[e], self._findings(self.monitor, e),
                              self._status(e), recent) for e in eps]  # fmt: skip
            self.endpoint_list.show(rows, self.selected)
        if self.endpoint_list.display != (len(eps) > 1):
            self.endpoint_list.display = len(eps) > 1
        view = self.current_view()
        if ep is not None and view is not None:
            ev: EndpointView = self.monitor.endpoints[ep]
            error = ev.last.error if ev.last is not None and not ev.last.ok else None
            self.triage.show(verdict.lines(self._findings(self.monitor, ep), error=error,
                                           polls=ev.store.polls))  # fmt: skip
            self.grid.show(view)
            if isinstance(self.screen, EnginesScreen):
                self.screen.show(view)
        else:
            self.triage.show([verdict.Line("info", "connecting…", label="…")])
        title = f"Scheduler · {durations.exact(self.window_s)}"
        if self.grid.border_title != title:
            self.grid.border_title = title  # a new title repaints the whole widget: on change
        self._choose_layout()  # the GPU lines or the endpoints' rows may have changed
        local = [e.local for e in self.monitor.endpoints.values()]
        self.gpus.show(self.monitor.gpus, remote_only=bool(local) and not any(local),
                       table=self.thresholds)  # fmt: skip

    # -- actions ---------------------------------------------------------------------------------

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_show_help_panel(self) -> None:
        """The command palette's "Keys": vtop's own key reference, a modal that Escape closes,
        instead of Textual's docked panel, which Escape did not close and which squashed the
        dashboard and garbled the footer beside it."""
        self.action_help()

    def action_pause(self) -> None:
        self.paused = not self.paused
        if self.paused:
            self._show_header()
            self.notify("paused: the screen is frozen; polling and triage go on", timeout=3)
        else:
            self.refresh_view()

    def action_interval(self, step: int) -> None:
        """One rung along `INTERVALS`; at either end, a notice that says so (a key that does
        nothing and says nothing reads as a key that does not work)."""
        i = min(range(len(INTERVALS)), key=lambda n: abs(INTERVALS[n] - self.interval))
        i = max(0, min(len(INTERVALS) - 1, i + step))
        if INTERVALS[i] == self.interval:
            end = "fastest" if step < 0 else "slowest"
            self.notify(f"{end} poll interval already: {fmt.interval(self.interval)}", timeout=3)
            return
        self.interval = INTERVALS[i]
        retime(self.source, self.interval)
        self._show_header()
        if self._autopoll and self._timer is not None:
            since = time.monotonic() - (self._poll_started or time.monotonic())
            self._arm(self.interval - since)

    def action_window(self) -> None:
        i = WINDOWS.index(self.window_s) if self.window_s in WINDOWS else -1
        self.window_s = WINDOWS[(i + 1) % len(WINDOWS)]
        self.refresh_view()

    def action_choose(self, index: int) -> None:
        if 0 <= index < len(self.endpoints) and index != self.selected:
            self.selected = index
            self.refresh_view()

    def on_endpoint_list_chosen(self, message: EndpointList.Chosen) -> None:
        self.action_choose(message.index)

    def on_triage_panel_selected(self, message: TriagePanel.Selected) -> None:
        self.push_screen(FindingScreen(message.finding, self.monitor.t))

    def action_explain(self) -> None:
        focused = self.focused
        if isinstance(focused, PanelColumn) and focused.selected is not None:
            spec = focused.selected
            body = explain_text(spec.title, (spec.signal, *spec.related), table=self.thresholds)
            self.push_screen(ExplainScreen(spec.title, body))
        elif isinstance(focused, GpuPanel):
            names = ("gpu_util", "gpu_mem_used", "gpu_power", "gpu_temp", "gpu_sm_clock")
            self.push_screen(ExplainScreen("GPU", explain_text("GPU", names,
                                                               table=self.thresholds)))  # fmt: skip
        else:
            self.push_screen(ExplainScreen("Triage", Content(TRIAGE_HELP)))

    def action_copy(self) -> None:
        ep = self.endpoint
        if ep is None:
            self.copy_flags("")
            return
        found = self._findings(self.monitor, ep)
        selected = self.triage.selected if self.focused is self.triage else None
        if selected is not None and selected.state == "firing":
            self.copy_flags(" ".join(r.flag for r in selected.recommendations))
        else:
            self.copy_flags(verdict.recommended_flags(found))

    def copy_flags(self, flags: str) -> None:
        """Put `flags` on the user's clipboard (OSC 52) and on screen."""
        if not flags:
            self.notify("nothing to copy: no firing finding recommends a flag change",
                        severity="warning", timeout=4)  # fmt: skip
            return
        self.copy_to_clipboard(flags)
        driver = self._driver
        if os.environ.get("TMUX") and driver is not None:
            driver.write(osc52.tmux_passthrough(flags))
        self.notify(flags, title="copied (OSC 52)", timeout=6)

    def action_engines(self) -> None:
        view = self.current_view()
        if view is not None and not isinstance(self.screen, EnginesScreen):
            self.push_screen(EnginesScreen(view))

    def action_record(self) -> None:
        """Start recording every frame to a new trace here, or stop (the file stays valid)."""
        if self.recorder is not None and self.recorder.active:
            self._stop_recording()
        else:
            path = self.record_dir / time.strftime("vtop-%Y%m%d-%H%M%S.vtrace")
            try:
                self.recorder = Recorder(
                    path, sources=list(self.monitor.endpoints), interval_s=self.interval,
                    notify=lambda message: self.notify(message, severity="error", timeout=10),
                )  # fmt: skip
            except TraceWriteError as exc:
                self.notify(f"cannot record: {exc}", severity="error", timeout=8)
                return
            sample_host(self.source, True)
            self.notify(f"recording to {path} (r stops)", title="recording", timeout=5)
        self._show_header()

    def _stop_recording(self) -> None:
        recorder, self.recorder = self.recorder, None
        if recorder is None:
            return
        sample_host(self.source, False)
        recorder.close()
        if recorder.error is None:
            self.notify(f"{recorder.path}: {recorder.polls} polls, {recorder.bytes // 1024} KiB",
                        title="recording stopped", timeout=6)  # fmt: skip

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Pause / resume", "Freeze the screen (polling goes on)",
                            self.action_pause)  # fmt: skip
        yield SystemCommand("Next window", "Cycle the window: 1m, 5m, 15m, 1h",
                            self.action_window)  # fmt: skip
        yield SystemCommand("Poll faster", "Shorter poll interval",
                            lambda: self.action_interval(-1))  # fmt: skip
        yield SystemCommand("Poll slower", "Longer poll interval",
                            lambda: self.action_interval(1))  # fmt: skip
        yield SystemCommand("Explain", "What the focused panel means", self.action_explain)
        yield SystemCommand("Copy recommended flags", "OSC 52 clipboard", self.action_copy)
        yield SystemCommand("Engines", "Per-engine breakdown", self.action_engines)
        yield SystemCommand("Record", "Record a trace", self.action_record)
