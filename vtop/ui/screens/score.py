"""Training's end: the score, and each incident with what was answered and what it was."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from vtop.training.grading import Score
from vtop.ui.views.training import answered


def body(score: Score) -> Content:
    parts: list[str | tuple[str, str]] = [(score.summary(), "bold")]
    for v in score.verdicts:
        q = v.question
        mark = ("✓", "bold $success") if v.diagnosis else ("✗", "bold $error")
        parts += [
            "\n",
            mark,
            f" {q.number}. {q.finding.rule}: {v.points} of {q.points}",
            (f"\n     you: {answered(v)}", "$text-muted"),
        ]
    return Content.assemble(*parts)


class ScoreScreen(ModalScreen[None]):
    """The score at the end of a training session."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,enter,q", "dismiss", "Close")]

    def __init__(self, score: Score) -> None:
        super().__init__()
        self.score = score

    def compose(self) -> ComposeResult:
        with Vertical(id="score", classes="dialog") as box:
            box.border_title = "training: score"
            with VerticalScroll():
                yield Static(body(self.score), id="score-body")
            yield Static(
                "[dim]Enter closes; the replay goes on · q then quits[/dim]", classes="dialog-hint"
            )
