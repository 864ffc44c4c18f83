"""The replay's player: the virtual clock's one-shot timer, and the keys that move along the trace.

Frames due on the virtual clock are fed at most ten times a second whatever the speed, and
only while playing (nothing ticks when paused); a move never passes an open question in
training; a seek or a step back rebuilds the monitor's history in a worker thread. A key that
cannot do anything (the fastest speed already, no finding ahead) says so. A mixin of
`ReplayApp` (`vtop.ui.replay_host` says how the parts fit).
"""

from __future__ import annotations

import asyncio

from textual import work
from textual.worker import get_current_worker

from vtop import durations
from vtop.monitor import Monitor
from vtop.ui.replay_host import ReplayHost
from vtop.ui.replay_view import utc
from vtop.ui.screens.goto import GoToScreen
from vtop.ui.screens.replay_help import ReplayHelpScreen
from vtop.ui.views.player import Backfill, target

FASTER = "greater_than_sign,right_square_bracket,plus,equals_sign"
SLOWER = "less_than_sign,left_square_bracket,minus"
TICK_MIN_S, TICK_MAX_S = 0.1, 0.5
"""Frames due are fed at most every 0.1 s (10 redraws a second at 1000×) and at least every
0.5 s (a 1 s trace at 1× shows each poll within half a second of its time)."""


class PlayerControlsMixin(ReplayHost):
    """The clock (`_schedule`, `advance`, `seek_to`) and the player's keys."""

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

    def action_help(self) -> None:
        if not isinstance(self.screen, ReplayHelpScreen):
            self.push_screen(ReplayHelpScreen(training=self.training))

    def action_play(self) -> None:
        if self.session is not None and self.session.due(self.player.position) is not None:
            self.action_answer()
            return
        if self._held:
            self.notify(
                "the incidents are still being found; the replay goes on when they are", timeout=3
            )
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
