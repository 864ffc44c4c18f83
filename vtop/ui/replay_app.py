"""`vtop --replay FILE`: the dashboard over a recorded trace, with a timeline; `--train` quizzes.

The screen is the live dashboard (`VtopApp`) with its source swapped for a `ReplaySource` and
its clock for the trace's: the panels, charts, header and triage panel are the same widgets fed
the same way, so a replay reads exactly like the incident did live. What is added:

- a player (`vtop.ui.player.Player`): frames due on the virtual clock are fed at most ten times
  a second, whatever the speed, so 1000× costs ten redraws a second, not a thousand; a seek
  rebuilds the monitor from the history before the new position;
- the findings of one pass of the report's code over the whole trace, made in a worker thread
  and streamed in as it goes (`analyse`): the triage panel shows the findings of the last rule
  evaluation at or before the position, which is what `vtop --replay FILE --report --to T`
  says at T, and the pass also yields the timeline's marks and training's questions;
- the timeline (position, duration, marks, speed, play state) and the player's keys;
- with `train`, the findings stay hidden; the replay stops where each rule starts firing and
  asks (`QuestionScreen`); answers are graded by `vtop.report.train`, as the text quiz grades
  them, and the score comes at the end (`ScoreScreen`). The replay plays while the pass is
  still finding the incidents (the triage line says how far it is), held at the first moment
  a finding fires, before which no question can be: the pass runs far faster than the replay,
  so the first question comes when the replay reaches it, not seconds of blank screen later.

The header's status says "replay" and the trace's time (UTC), never the wall clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import ClassVar

from textual import work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Footer
from textual.worker import get_current_worker

from vtop import durations
from vtop.model import Finding, Severity
from vtop.monitor import Monitor
from vtop.report.train import Choice, Verdict
from vtop.sources.replay import ReplaySource
from vtop.sources.status import ConnectionStatus
from vtop.trace.reader import TraceError
from vtop.triage.engine import Engine
from vtop.ui import verdict
from vtop.ui.app import SelfCpu, VtopApp
from vtop.ui.player import (
    Analysis,
    Backfill,
    Cancelled,
    Chunk,
    FindingsTimeline,
    Player,
    analyse,
    target,
)
from vtop.ui.screens.goto import GoToScreen
from vtop.ui.screens.question import QuestionScreen
from vtop.ui.screens.replay_help import ReplayHelpScreen
from vtop.ui.screens.score import ScoreScreen
from vtop.ui.thresholds import table_for
from vtop.ui.training import Change, Session
from vtop.ui.widgets.timeline import Mark, Timeline, TimelineState, marks_of

FASTER = "greater_than_sign,right_square_bracket,plus,equals_sign"
SLOWER = "less_than_sign,left_square_bracket,minus"
TICK_MIN_S, TICK_MAX_S = 0.1, 0.5
"""Frames due are fed at most every 0.1 s (10 redraws a second at 1000×) and at least every
0.5 s (a 1 s trace at 1× shows each poll within half a second of its time)."""


def utc(t: float, *, date: bool) -> str:
    stamp = datetime.fromtimestamp(t, UTC)
    return stamp.strftime("%Y-%m-%d %H:%M:%SZ" if date else "%H:%M:%SZ")


class ReplayApp(VtopApp):
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
        super().__init__(source, self.player.monitor, interval=interval, window_s=window_s,
                         theme=theme, findings=self._findings_at,
                         thresholds=table_for(engine.rules), self_cpu=self_cpu,
                         autopoll=False)  # fmt: skip
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

    # -- the analysis pass (a worker thread) -----------------------------------------------------

    @work(thread=True, exclusive=True, group="analysis", exit_on_error=False)
    def _analyse(self) -> None:
        worker = get_current_worker()

        def send(chunk: Chunk) -> None:
            if not worker.is_cancelled:
                self.call_from_thread(self._take_chunk, chunk)

        try:
            analysis = analyse(self.replay.reader.path, self.rules, self.catalog, on_chunk=send,
                               cancelled=lambda: worker.is_cancelled,
                               warn=lambda message: None)  # fmt: skip
        except Cancelled:
            return
        except TraceError as exc:
            self.call_from_thread(self.notify, f"findings: {exc}", severity="error", timeout=10)
            return
        if not worker.is_cancelled:
            self.call_from_thread(self.analysed, analysis)

    def _take_chunk(self, chunk: Chunk) -> None:
        unknown = self.findings_timeline.at(self.monitor.t) is None
        self.findings_timeline.extend(chunk)
        if self.training and self._first_firing is None:
            evaluations = zip(chunk.times, chunk.findings, strict=True)
            fired = (t for t, found in evaluations if any(f.state == "firing" for f in found))
            self._first_firing = next(fired, None)
        stop = self._stop_at()
        if self._held and stop is not None and stop > self.player.position + 1e-6:
            self._held = False  # the pass has read further: the replay goes on
            self.replay.play()
            self._schedule()
        if unknown and self.findings_timeline.at(self.monitor.t) is not None:
            self.refresh_view()
            return
        if self.training and self.session is None:
            self.triage.show(self._training_lines())  # how far, while nothing else moves
        elif unknown and not self.training:
            self.triage.show([self._computing_line()])
        self._show_timeline()

    def analysed(self, analysis: Analysis) -> None:
        """The pass is over: marks, questions, and findings everywhere."""
        self.analysis = analysis
        self.findings_timeline.complete = True
        if self.training:
            self.session = Session(analysis.questions)
            self.replay.set_marks([(q.t, "incident") for q in analysis.questions])
            if self.autoplay and (self._held or not self._started):
                self.replay.play()
            self._held = False
        else:
            self.replay.set_marks(analysis.marks)
        self.refresh_view()
        self._schedule()
        self._after_move()

    def _findings_at(self, monitor: Monitor, endpoint: str) -> Sequence[Finding] | None:
        if self.training:
            return ()
        return self.findings_timeline.at(monitor.t, endpoint)

    # -- playing ---------------------------------------------------------------------------------

    def _schedule(self) -> None:
        """One one-shot timer to the next feed, only while playing (nothing ticks when paused)."""
        if self._tick is not None:
            self._tick.cancel()
            self._tick = None
        if not self.autoplay or not self.replay.playing or self.player.at_end:
            return
        delay = max(TICK_MIN_S, min(TICK_MAX_S, self.interval / self.replay.speed))
        self._tick = asyncio.get_running_loop().call_later(delay, self._on_tick)

    def _on_tick(self) -> None:
        self._tick = None
        try:
            self.advance()
        except Exception as exc:  # a damaged frame must not stop the screen silently
            if not self._tick_failed:
                self._tick_failed = True
                self.notify(f"replay: {exc}", severity="error", timeout=10)
        self._schedule()

    def _stop_at(self) -> float | None:
        """How far the replay may go: to the open question; in training while the pass runs,
        to the first moment a finding fires (no question comes before it) or, before that,
        as far as the pass has read."""
        if self.session is not None:
            return self.session.stop_at()
        if not self.training:
            return None
        if self._first_firing is not None:
            return self._first_firing
        reached = self.findings_timeline.reached
        return reached if reached is not None else self.player.start

    def advance(self) -> int:
        """Feed the frames the virtual clock has passed (never past an open question)."""
        stop = self._stop_at()
        playing = self.replay.playing
        n = self.player.advance(until=stop)
        if self.training and self.session is None and playing and not self.replay.playing:
            self._held = True  # at `stop` until the pass reads further (`_take_chunk`)
        if n:
            self.refresh_view()
        self._after_move()
        return n

    def _after_move(self) -> None:
        """After any move: end of trace, a question reached, the timeline."""
        if self.player.at_end and self.replay.playing:
            self.replay.pause()
            self.notify("end of the trace (space plays it again from the start)", timeout=4)
        q = self.session.due(self.player.position) if self.session is not None else None
        if q is not None:
            self.replay.pause()
            if self._question is None and self._hidden != q.number:
                self.action_answer()
        self._show_timeline()

    def seek_to(self, t: float) -> None:
        """Jump (never past an open question in training) and rebuild the history."""
        stop = self._stop_at()
        if stop is not None:
            t = min(t, stop)
        job = self.player.seek(t)
        self.monitor = self.player.monitor
        self.refresh_view()
        if job is not None:
            self._backfill(job)
        self._after_move()
        self._schedule()

    @work(thread=True, exclusive=True, group="backfill", exit_on_error=False)
    def _backfill(self, job: Backfill) -> None:
        worker = get_current_worker()
        monitor = job.run(lambda: worker.is_cancelled)
        if monitor is not None and not worker.is_cancelled:
            self.call_from_thread(self._adopt, job.generation, monitor)

    def _adopt(self, generation: int, monitor: Monitor) -> None:
        if self.player.adopt(generation, monitor):
            self.monitor = self.player.monitor
            self.refresh_view()

    # -- drawing ---------------------------------------------------------------------------------

    def _status(self, endpoint: str) -> ConnectionStatus:
        where = utc(self.player.position, date=self.size.width >= 110)
        return ConnectionStatus("replay", detail=f"replay {where}")

    def refresh_view(self) -> None:
        super().refresh_view()
        if self.training:
            self.triage.show(self._training_lines())
        elif self.monitor.t is not None and self.findings_timeline.at(self.monitor.t) is None:
            self.triage.show([self._computing_line()])
        self._show_timeline()

    def _computing_line(self) -> verdict.Line:
        return verdict.Line("info", f"computing the findings over the trace… "
                            f"{self._progress(long=True)}", label="…")  # fmt: skip

    def _progress(self, *, long: bool = False) -> str:
        """`35%`; `long`: `35% (5:15 of 15:01)`, how far the pass is through the trace."""
        reached = self.findings_timeline.reached
        span = self.player.end - self.player.start
        if reached is None or span <= 0:
            return ""
        done = min(span, max(0.0, reached - self.player.start))
        share = f"{done / span:.0%}"
        return f"{share} ({durations.clock(done)} of {durations.clock(span)})" if long else share

    def _training_lines(self) -> list[verdict.Line]:
        session = self.session
        if session is None:  # the pass over the trace streams in: say how far it is
            name = self.replay.reader.name
            return [verdict.Line("info", f"training: finding the incidents in {name}… "
                                 + self._progress(long=True), label="…")]  # fmt: skip
        if not session.questions:
            return [verdict.Line("ok", "no incident in this trace: nothing to diagnose; "
                                 "the replay plays on", label="OK")]  # fmt: skip
        head = verdict.Line("info", "training: findings stay hidden until you answer · "
                            + session.progress(), label="?")  # fmt: skip
        q = session.due(self.player.position)
        if q is not None:
            ask = f"incident {q.number} of {len(session.questions)}: what is wrong here? a answers"
            return [verdict.Line("firing", ask, Severity.INFO, label="?"), head]
        if session.done:
            return [verdict.Line("ok", session.score.summary(), label="DONE"), head]
        return [head]

    def _show_timeline(self) -> None:
        p = self.player
        marks: tuple[Mark, ...] = marks_of(self.replay.marks)
        self.timeline.show(TimelineState(
            start=p.start, end=p.end, position=p.position, playing=self.replay.playing,
            speed=self.replay.speed, at_end=p.at_end, marks=marks, hidden=self.training,
            note=self._note(),
        ))  # fmt: skip

    def _note(self) -> str:
        if not self.findings_timeline.complete:
            what = "incidents" if self.training else "findings"
            return f"{what}: computing {self._progress()}"
        nxt = self.player.next_mark()
        if nxt is None:
            return "no finding starts after here" if not self.training else "no incident ahead"
        at = durations.clock(nxt[0] - self.player.start)
        if self.training:
            return f"n: next incident at {at}"
        level, _, rule = nxt[1].partition(" ")
        return f"n: {rule or level} at {at}"

    # -- keys ------------------------------------------------------------------------------------

    def action_help(self) -> None:
        if not isinstance(self.screen, ReplayHelpScreen):
            self.push_screen(ReplayHelpScreen(training=self.training))

    def action_play(self) -> None:
        if self.session is not None and self.session.due(self.player.position) is not None:
            self.action_answer()
            return
        if self._held:
            self.notify("the incidents are still being found; the replay goes on when they are",
                        timeout=3)  # fmt: skip
            return
        if self.player.at_end and not self.replay.playing:
            self.seek_to(self.player.start)
        self.replay.toggle()
        self._schedule()
        self._show_timeline()

    def action_pause(self) -> None:
        self.action_play()

    def action_speed(self, step: int) -> None:
        before = self.replay.speed
        after = self.replay.faster() if step > 0 else self.replay.slower()
        if after == before:  # at an end of the ladder: say so, a silent key reads as broken
            end = "fastest" if step > 0 else "slowest"
            self.notify(f"{end} replay speed already: ×{after:g}", timeout=3)
        self._schedule()
        self._show_timeline()

    def action_interval(self, step: int) -> None:
        self.action_speed(-step)

    def action_step(self, step: int) -> None:
        if step > 0:
            stop = self._stop_at()
            if stop is not None and self.player.position >= stop - 1e-6:
                self._after_move()
                return
            if self.player.step(1):
                self.refresh_view()
            self._after_move()
        else:
            job = self.player.step_back()
            self.monitor = self.player.monitor
            self.refresh_view()
            if job is not None:
                self._backfill(job)
            self._after_move()

    def action_goto(self) -> None:
        p = self.player
        where = (
            f"{durations.clock(p.position - p.start)} of {durations.clock(p.end - p.start)}, "
            + utc(p.position, date=True)
        )

        def parse(text: str) -> float:
            return target(text, p.start, p.end)

        def done(t: float | None) -> None:
            if t is not None:
                self.seek_to(t)

        self.push_screen(GoToScreen(parse, where), done)

    def action_mark(self, step: int) -> None:
        if not self.findings_timeline.complete:
            self.notify(f"still computing where findings start ({self._progress()})", timeout=3)
            return
        mark = self.player.next_mark() if step > 0 else self.player.previous_mark()
        if mark is None:
            what = "incident" if self.training else "finding start"
            where = "after" if step > 0 else "before"
            self.notify(f"no {what} {where} here", timeout=3)
            return
        self.seek_to(mark[0])
        if not self.training:
            self.notify(mark[1], title=utc(mark[0], date=False), timeout=3)

    def action_answer(self) -> None:
        session = self.session
        q = session.due(self.player.position) if session is not None else None
        if session is None or q is None:
            if self.training:
                self.notify("no question open here: the replay stops at the next incident",
                            timeout=3)  # fmt: skip
            return
        if self._question is not None:
            return
        self.replay.pause()
        self._schedule()

        def grade(question: object, change: Change, rule: str) -> Verdict:
            assert session is not None
            return session.answer(q, change, rule)

        screen = QuestionScreen(q, len(session.questions), utc(q.t, date=False), grade)
        self._question = screen
        self.push_screen(screen, self._answered)

    def _answered(self, result: Verdict | None) -> None:
        question, self._question = self._question, None
        self.refresh_view()
        session = self.session
        if result is None or session is None:
            self._hidden = question.question.number if question is not None else None
            return
        if session.done:
            self.push_screen(ScoreScreen(session.score))
        elif self.autoplay:
            self.replay.play()
            self._schedule()
        self._show_timeline()

    def action_window(self) -> None:
        """A longer window needs older history than a seek may have rebuilt: read it."""
        super().action_window()
        self.player.window_s = self.window_s
        ep = self.endpoint
        if ep is None or self.monitor.t is None:
            return
        times = self.monitor.endpoints[ep].store.times()
        want = max(self.player.start, self.monitor.t - self.window_s)
        if times and times[0] > want + 2 * self.interval:
            self.seek_to(self.monitor.t)

    def action_record(self) -> None:
        self.notify("this is a recording already: nothing new to record", timeout=3)

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from App.get_system_commands(self, screen)
        yield SystemCommand("Play / pause", "Play or pause the replay", self.action_play)
        yield SystemCommand("Faster", "Replay faster (up to 1000×)", lambda: self.action_speed(1))
        yield SystemCommand("Slower", "Replay slower (down to 1×)", lambda: self.action_speed(-1))
        yield SystemCommand("Go to", "Go to a time of the trace", self.action_goto)
        yield SystemCommand("Next finding", "Jump to where the next finding starts",
                            lambda: self.action_mark(1))  # fmt: skip
        yield SystemCommand("Previous finding", "Jump to where the previous finding starts",
                            lambda: self.action_mark(-1))  # fmt: skip
        yield SystemCommand("Next window", "Cycle the window: 1m, 5m, 15m, 1h",
                            self.action_window)  # fmt: skip
        yield SystemCommand("Explain", "What the focused panel means", self.action_explain)
        if not self.training:
            yield SystemCommand("Copy recommended flags", "OSC 52 clipboard", self.action_copy)
