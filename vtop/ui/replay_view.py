"""The replay's drawing: the trace's time in the header, the verdict while findings are being
computed or hidden for training, and the timeline.

On top of the dashboard's `refresh_view`, never instead of it, so a replay reads exactly as
the incident did live; the header's status says "replay" and the trace's time (UTC), never
the wall clock. A mixin of `ReplayApp` (`vtop.ui.replay_host` says how the parts fit).
"""

from __future__ import annotations

from datetime import UTC, datetime

from vtop import durations
from vtop.model import Severity
from vtop.sources.status import ConnectionStatus
from vtop.ui.replay_host import ReplayHost
from vtop.ui.views import verdict
from vtop.ui.widgets.timeline import Mark, TimelineState, marks_of


def utc(t: float, *, date: bool) -> str:
    stamp = datetime.fromtimestamp(t, UTC)
    return stamp.strftime("%Y-%m-%d %H:%M:%SZ" if date else "%H:%M:%SZ")


class ReplayViewMixin(ReplayHost):
    """The replay's status, verdict lines and timeline."""

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
        return verdict.Line(
            "info", f"computing the findings over the trace… {self._progress(long=True)}", label="…"
        )

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
            return [
                verdict.Line(
                    "info",
                    f"training: finding the incidents in {name}… " + self._progress(long=True),
                    label="…",
                )
            ]
        if not session.questions:
            return [
                verdict.Line(
                    "ok",
                    "no incident in this trace: nothing to diagnose; the replay plays on",
                    label="OK",
                )
            ]
        head = verdict.Line(
            "info",
            "training: findings stay hidden until you answer · " + session.progress(),
            label="?",
        )
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
        self.timeline.show(
            TimelineState(
                start=p.start,
                end=p.end,
                position=p.position,
                playing=self.replay.playing,
                speed=self.replay.speed,
                at_end=p.at_end,
                marks=marks,
                hidden=self.training,
                note=self._note(),
            )
        )

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
