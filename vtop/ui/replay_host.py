"""What the replay's parts share: its state and the methods one part calls on another.

`ReplayApp` is the live dashboard (`VtopApp`) plus mixins, one concern each: `replay_view`
(status, verdict lines, timeline), `replay_controls` (the player's clock and keys),
`replay_analysis` (the pass over the trace, in a worker thread) and `replay_training` (the
quiz's questions). As for the dashboard (`vtop.ui.app_host`), the mixins are plain classes at
run time, so Textual sees the class tree it saw when the replay was one class, and stand for
the type checker on `ReplayHost`, declared here only under `TYPE_CHECKING`: the replay's
attributes (given their values by `ReplayApp.__init__`) and the methods the mixins call on one
another, among them the cycle the quiz makes (a move reaches a question, answering it plays
on).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Sequence

    from vtop.sources.replay import ReplaySource
    from vtop.training.questions import Choice
    from vtop.triage.engine import Engine
    from vtop.ui.app import VtopApp
    from vtop.ui.screens.question import QuestionScreen
    from vtop.ui.views import verdict
    from vtop.ui.views.player import Analysis, Chunk, FindingsTimeline, Player
    from vtop.ui.views.training import Session
    from vtop.ui.widgets.timeline import Timeline

    class ReplayHost(VtopApp):
        """The replay as its mixins see it (type checking only)."""

        player: Player
        rules: Engine
        training: bool
        findings_timeline: FindingsTimeline
        analysis: Analysis | None
        session: Session | None
        catalog: list[Choice]
        replay: ReplaySource
        autoplay: bool
        timeline: Timeline
        _warnings: list[str]
        _tick: asyncio.TimerHandle | None
        _question: QuestionScreen | None
        _hidden: int | None
        _precomputed: tuple[Analysis, Sequence[Chunk]] | None
        _tick_failed: bool
        _first_firing: float | None
        _held: bool
        _started: bool

        def _stop_at(self) -> float | None: ...
        def _schedule(self) -> None: ...
        def _after_move(self) -> None: ...
        def _show_timeline(self) -> None: ...
        def _progress(self, *, long: bool = False) -> str: ...
        def _computing_line(self) -> verdict.Line: ...
        def _training_lines(self) -> list[verdict.Line]: ...
        def action_answer(self) -> None: ...

else:
    ReplayHost = object
