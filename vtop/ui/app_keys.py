"""The dashboard's keys and command palette: pause, poll interval, window, endpoint, explain,
copy flags, engines, help.

Each key is an `action_…` method (Textual's idiom), so the footer, the command palette and
`?` reach the same code; a key that cannot do anything says why on screen rather than doing
nothing. The replay overrides some of them (space plays, +/- change the speed). A mixin of
`VtopApp` (`vtop.ui.app_host` says how the parts fit).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable

from textual.app import SystemCommand
from textual.content import Content
from textual.screen import Screen

from vtop import fmt
from vtop.sources.base import retime
from vtop.ui import osc52
from vtop.ui.app_host import DashboardHost
from vtop.ui.screens.engines import EnginesScreen
from vtop.ui.screens.explain import ExplainScreen, explain_text
from vtop.ui.screens.finding import FindingScreen
from vtop.ui.screens.help import HelpScreen
from vtop.ui.views import verdict
from vtop.ui.widgets.endpoint_list import EndpointList
from vtop.ui.widgets.gpu_panel import GpuPanel
from vtop.ui.widgets.panel_column import PanelColumn
from vtop.ui.widgets.triage_panel import TriagePanel

WINDOWS = (60.0, 300.0, 900.0, 3600.0)
INTERVALS = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)

TRIAGE_HELP = (
    "Each rule of the triage engine watches a condition over the window. A finding is "
    "pending while its condition holds and its evidence accrues (shown as "
    "'rule: 8 of 15 s'), firing once the evidence is in, and suppressed when a root "
    "cause already explains it (then it gives no advice, so vtop never says 'raise "
    "max_num_seqs' while the KV cache is the wall). While nothing fires, the likely "
    "cause leads ('? likely budget-too-small · 8 of 15 s'), with no advice: flags come "
    "with the verdict. Enter opens a finding: what the twin predicts its flags will buy, its "
    "evidence, and each recommended flag with the formula and the inputs it was computed "
    "from, each input with where it came from. c copies the flags."
)


class KeysMixin(DashboardHost):
    """What the dashboard's keys do."""

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
        # Redrawn on the way back: the twin may have chosen the value the panel shows.
        self.push_screen(
            FindingScreen(
                message.finding, self.monitor.t, monitor=self.monitor, predictor=self.predictor
            ),
            lambda _: self.refresh_view(),
        )

    def action_explain(self) -> None:
        focused = self.focused
        if isinstance(focused, PanelColumn) and focused.selected is not None:
            spec = focused.selected
            body = explain_text(spec.title, (spec.signal, *spec.related), table=self.thresholds)
            self.push_screen(ExplainScreen(spec.title, body))
        elif isinstance(focused, GpuPanel):
            names = ("gpu_util", "gpu_mem_used", "gpu_power", "gpu_temp", "gpu_sm_clock")
            self.push_screen(
                ExplainScreen("GPU", explain_text("GPU", names, table=self.thresholds))
            )
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
            self.notify(
                "nothing to copy: no firing finding recommends a flag change",
                severity="warning",
                timeout=4,
            )
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

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand(
            "Pause / resume", "Freeze the screen (polling goes on)", self.action_pause
        )
        yield SystemCommand("Next window", "Cycle the window: 1m, 5m, 15m, 1h", self.action_window)
        yield SystemCommand(
            "Poll faster", "Shorter poll interval", lambda: self.action_interval(-1)
        )
        yield SystemCommand("Poll slower", "Longer poll interval", lambda: self.action_interval(1))
        yield SystemCommand("Explain", "What the focused panel means", self.action_explain)
        yield SystemCommand("Copy recommended flags", "OSC 52 clipboard", self.action_copy)
        yield SystemCommand("Engines", "Per-engine breakdown", self.action_engines)
        yield SystemCommand("Record", "Record a trace", self.action_record)
