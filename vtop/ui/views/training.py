"""A training session on the replay screen, without the screen: which question is open, the
answers given, the score (no Textual here).

The questions, the grading and the score are `vtop.training`'s, the same the text quiz
uses, so the screen and `--train` on a pipe agree on every point. What this adds is what a
player needs: questions are asked in time order, one at a time; the replay may not run past
an unanswered one (`stop_at`), and going back to look again does not ask twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vtop import knobs
from vtop.training.grading import Answer, Score, Verdict, grade
from vtop.training.questions import Direction, Question

NO_KNOB = "no server knob: the fix is elsewhere (the client, the load)"
VERBS = {"enable": "turn on", "disable": "turn off"}


@dataclass(frozen=True, slots=True)
class Change:
    """One choice of the change question: a knob and a direction, or none."""

    knob: str | None
    direction: Direction | None

    @property
    def label(self) -> str:
        if self.knob is None or self.direction is None:
            return NO_KNOB
        return f"{VERBS.get(self.direction, self.direction)} {knobs.flag_name(self.knob)}"


def changes(question: Question) -> list[Change]:
    """Every change the learner may pick, the same on every question, "none" last."""
    return [Change(k, d) for k, d in question.changes()] + [Change(None, None)]


class Session:
    """The questions of one trace and the answers given so far."""

    def __init__(self, questions: Sequence[Question]) -> None:
        self.questions = list(questions)
        self.verdicts: dict[int, Verdict] = {}

    @property
    def open(self) -> Question | None:
        """The earliest question not yet answered."""
        return next((q for q in self.questions if q.number not in self.verdicts), None)

    @property
    def done(self) -> bool:
        return self.open is None

    def stop_at(self) -> float | None:
        """The replay may show frames up to this time, and no further, until it is answered."""
        q = self.open
        return q.t if q is not None else None

    def due(self, position: float) -> Question | None:
        """The open question, if the replay has reached its time."""
        q = self.open
        return q if q is not None and position >= q.t - 1e-6 else None

    def answer(self, question: Question, change: Change, rule: str) -> Verdict:
        verdict = grade(question, Answer(rule, change.knob, direction=change.direction))
        self.verdicts[question.number] = verdict
        return verdict

    @property
    def score(self) -> Score:
        return Score([self.verdicts[q.number] for q in self.questions if q.number in self.verdicts])

    def progress(self) -> str:
        """`2 of 3 incidents answered · 6 of 8 points`."""
        s = self.score
        answered = f"{len(self.verdicts)} of {len(self.questions)} incidents answered"
        return f"{answered} · {s.points} of {s.possible} points" if self.verdicts else answered


def answered(verdict: Verdict) -> str:
    """What the learner said, as the choices say it: `memory-ceiling, raise --max-num-seqs`."""
    a = verdict.answer
    return f"{a.rule}, {Change(a.knob, a.direction).label if a.knob else 'no server knob'}"
