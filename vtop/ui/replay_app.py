"""`vtop --replay FILE`: the dashboard over a recorded trace, with a timeline; `--train` quizzes.

The screen is the live dashboard (`VtopApp`) with its source swapped for a `ReplaySource` and
its clock for the trace's: the panels, charts, header and triage panel are the same widgets fed
the same way, so a replay reads exactly like the incident did live. What is added:

- a player (`vtop.ui.views.player.Player`): frames due on the virtual clock are fed at most
  ten times a second, whatever the speed, so 1000× costs ten redraws a second, not a
  thousand; a seek rebuilds the monitor from the history before the new position;
- the findings of one pass of the report's code over the whole trace, made in a worker thread
  and streamed in as it goes (`analyse`): the triage panel shows the findings of the last rule
  evaluation at or before the position, which is what `vtop --replay FILE --report --to T`
  says at T, and the pass also yields the timeline's marks and training's questions;
- the timeline (position, duration, marks, speed, play state) and the player's keys;
- with `train`, the findings stay hidden; the replay stops where each rule starts firing and
  asks (`QuestionScreen`); answers are graded by `vtop.training`, as the text quiz grades
  them, and the score comes at the end (`ScoreScreen`). The replay plays while the pass is
  still finding the incidents (the triage line says how far it is), held at the first moment
  a finding fires, before which no question can be: the pass runs far faster than the replay,
  so the first question comes when the replay reaches it, not seconds of blank screen later.

The header's status says "replay" and the trace's time (UTC), never the wall clock.

This module holds the replay's state, layout and lifecycle; the rest is one mixin per concern:
`replay_view` (status, verdict lines, timeline), `replay_controls` (the player's clock and keys),
`replay_analysis` (the pass) and `replay_training` (the questions); `replay_host` says how they
fit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import ClassVar

from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Footer

from vtop.sources.replay import ReplaySource
from vtop.training.questions import Choice
from vtop.triage.engine import Engine
from vtop.ui.app import SelfCpu, VtopApp
from vtop.ui.replay_analysis import AnalysisMixin
from vtop.ui.replay_controls import FASTER, SLOWER, PlayerControlsMixin
from vtop.ui.replay_training import TrainingMixin
from vtop.ui.replay_view import ReplayViewMixin, utc
from vtop.ui.screens.question import QuestionScreen
from vtop.ui.views.player import Analysis, Chunk, FindingsTimeline, Player
from vtop.ui.views.thresholds import table_for
from vtop.ui.views.training import Session
from vtop.ui.widgets.timeline import Timeline
from vtop.whatif.goals import Goals

__all__ = ["ReplayApp", "utc"]


class ReplayApp(AnalysisMixin, TrainingMixin, PlayerControlsMixin, ReplayViewMixin, VtopApp):
    """The dashboard over a trace, with a player; `train` turns it into a quiz."""

    CSS_PATH = ["vtop.tcss", "replay.tcss"]  # type: ignore[assignment]  # noqa: RUF012 (Textual's type)

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("space", "play", "Play"),
        Binding("p", "play", "Play/pause", show=False),
        Binding(FASTER, "speed(1)", "Faster", show=False),
        Binding(SLOWER, "speed(-1)", "Slower", show=False),
        Binding("full_stop", "step(1)", "Step", show=False),
        Binding("comma", "step(-1)", "Back", show=False),
        Binding("g", "goto", "Go to"),
        Binding("n", "mark(1)", "Next"),
        Binding("N", "mark(-1)", "Previous finding", show=False),
        Binding("a", "answer", "Answer", show=False),
        Binding("r", "record", "Record", show=False),
        Binding("e", "explain", "Explain", show=False),  # in ? help: the footer is for the player
        Binding("c", "copy", "Copy flags", show=False),
    ]

    def __init__(
        self,
        source: ReplaySource,
        engine: Engine,
        *,
        train: bool = False,
        window_s: float = 300.0,
        theme: str = "dark",
        self_cpu: SelfCpu | None = None,
        autoplay: bool = True,
        capacity: int = 3600,
        warnings: Sequence[str] = (),
        precomputed: tuple[Analysis, Sequence[Chunk]] | None = None,
        goals: Goals | None = None,
    ) -> None:
        """`precomputed`: a pass already made over this trace with these rules (`analyse`),
        e.g. by tests, instead of making one in a worker."""
        self.player = Player(source, capacity=capacity, window_s=window_s)
        self.rules = engine
        self.training = train
        self.findings_timeline = FindingsTimeline()
        self.analysis: Analysis | None = None
        self.session: Session | None = None
        self.catalog = [Choice(str(r.id), str(r.title)) for r in engine.rules]
        self._warnings = list(warnings)
        interval = source.reader.header.interval_s or 1.0
        super().__init__(
            source,
            self.player.monitor,
            interval=interval,
            window_s=window_s,
            theme=theme,
            findings=self._findings_at,
            thresholds=table_for(engine.rules),
            self_cpu=self_cpu,
            autopoll=False,
            goals=goals,
        )
        self.replay = source
        self.autoplay = autoplay
        self.timeline = Timeline()
        self._tick: asyncio.TimerHandle | None = None
        self._question: QuestionScreen | None = None
        self._hidden: int | None = None
        """The question the learner hid (Escape) to study the screen: `a` brings it back."""
        self._precomputed = precomputed
        self._tick_failed = False
        self._first_firing: float | None = None
        """Training, while the pass runs: the first evaluation where a finding fires."""
        self._held = False
        """Training, while the pass runs: the replay waits at `_stop_at` for more of it."""
        self._started = False
        """Training: the replay was set playing before the pass ended."""

    # -- layout and start ------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield self.header
        yield self.endpoint_list
        yield self.triage
        yield self.grid
        yield self.gpus
        with Vertical(id="player"):  # the timeline sits on the footer, at the bottom
            yield self.timeline
            yield Footer(compact=True)

    def on_mount(self) -> None:
        self.end_on_signals()
        for message in self._warnings:
            self.notify(message, severity="warning", timeout=10)
        self.notify_rule_errors(self.rules.errors)
        if self._precomputed is not None:
            analysis, chunks = self._precomputed
            for chunk in chunks:
                self.findings_timeline.extend(chunk)
            self.analysed(analysis)
        else:
            # After the first paint: the pass holds the interpreter for seconds, and started
            # at once it made the screen come up a second or two later, blank until then.
            self.call_after_refresh(self._analyse)
            if self.training and self.autoplay:
                self._started = True
                self.replay.play()
        self._schedule()

    async def on_unmount(self) -> None:
        if self._tick is not None:
            self._tick.cancel()
        self.workers.cancel_all()

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from App.get_system_commands(self, screen)
        yield SystemCommand("Play / pause", "Play or pause the replay", self.action_play)
        yield SystemCommand("Faster", "Replay faster (up to 1000×)", lambda: self.action_speed(1))
        yield SystemCommand("Slower", "Replay slower (down to 1×)", lambda: self.action_speed(-1))
        yield SystemCommand("Go to", "Go to a time of the trace", self.action_goto)
        yield SystemCommand(
            "Next finding", "Jump to where the next finding starts", lambda: self.action_mark(1)
        )
        yield SystemCommand(
            "Previous finding",
            "Jump to where the previous finding starts",
            lambda: self.action_mark(-1),
        )
        yield SystemCommand("Next window", "Cycle the window: 1m, 5m, 15m, 1h", self.action_window)
        yield SystemCommand("Explain", "What the focused panel means", self.action_explain)
        if not self.training:
            yield SystemCommand("Copy recommended flags", "OSC 52 clipboard", self.action_copy)
