"""The replay's quiz (`--train`): the question where a rule starts firing, and what comes after.

The findings stay hidden; the replay stops at each incident and asks (`QuestionScreen`);
answers are graded by `vtop.training`, as the text quiz grades them, the reveal says what
the advice would buy (the twin, on a worker), and the score comes at the end (`ScoreScreen`).
Escape hides a question to study the screen; `a` brings it back. A mixin of `ReplayApp`
(`vtop.ui.replay_host` says how the parts fit).
"""

from __future__ import annotations

from vtop.training.grading import Verdict
from vtop.ui.prediction import Job, Predicted
from vtop.ui.replay_host import ReplayHost
from vtop.ui.replay_view import utc
from vtop.ui.screens.question import QuestionScreen
from vtop.ui.screens.score import ScoreScreen
from vtop.ui.views.training import Change


class TrainingMixin(ReplayHost):
    """`a` answers the open question; the replay plays on once it is answered."""

    def action_answer(self) -> None:
        session = self.session
        q = session.due(self.player.position) if session is not None else None
        if session is None or q is None:
            if self.training:
                self.notify(
                    "no question open here: the replay stops at the next incident", timeout=3
                )
            return
        if self._question is not None:
            return
        self.replay.pause()
        self._schedule()

        def grade(question: object, change: Change, rule: str) -> Verdict:
            assert session is not None
            return session.answer(q, change, rule)

        def predict() -> Predicted | Job:
            # At the reveal, the replay stands at the incident: its store is the rule's.
            return self.predictor.start(self.monitor, q.finding)

        screen = QuestionScreen(q, len(session.questions), utc(q.t, date=False), grade, predict)
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
