"""Training's question: what is wrong here, and what would you change? Then the answer.

Three steps in one dialog, so the learner's eyes stay in one place: the diagnosis (the whole
rule catalog, never just the rules of this trace), the change (every knob a rule may
recommend with its directions, and "no server knob", the same list on every question), then
the reveal: right or not, the finding as the rule saw it at that moment, its evidence and its
recommendation. Escape before answering hides the question, to study the dashboard; `a`
brings it back. Grading is the caller's (`Session.answer`), so the screen and the text quiz
grade alike.

Under the reveal, what the finding's advice would buy: the caller's `predict` reads the store
as the reveal opens (the replay stands at the incident then), and the twin runs on a thread
worker (`vtop.ui.prediction`), so the reveal shows "running the twin…" and answers keys
meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, Literal

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import Worker

from vtop.training.grading import Verdict
from vtop.training.questions import Question
from vtop.ui.prediction import Job, Predicted
from vtop.ui.screens import predicting
from vtop.ui.views.detail import Row, predicting_rows
from vtop.ui.views.training import Change, answered, changes

Grade = Callable[[Question, Change, str], Verdict]
Predict = Callable[[], Predicted | Job]
"""Reads the store for the finding's prediction (on the loop): what to show now, or the twin's
job."""
Step = Literal["diagnosis", "change", "reveal"]

PROMPTS = {
    "diagnosis": "Something started to go wrong here. What is it?",
    "change": "And the fix: which server knob, which way? (or none)",
}
HINTS = {
    "diagnosis": "↑↓ Enter picks · Escape hides it to study the screen (a: back)",
    "change": "↑↓ Enter picks · Escape hides the question",
    "reveal": "Enter: back to the replay",
}


def reveal(verdict: Verdict) -> Content:
    """The verdict's lines: the first coloured by right or wrong."""
    first, *rest = verdict.lines()
    style = "bold $success" if verdict.diagnosis else "bold $error"
    parts: list[str | tuple[str, str]] = [
        (first, style),
        (f"\nyou: {answered(verdict)}", "$text-muted"),
    ]
    for line in rest:
        parts += ["\n", (line, "$accent") if line.lstrip().startswith("change:") else line]
    return Content.assemble(*parts)


def predicted(rows: list[Row]) -> Content:
    """The predicted effect's rows, as text (Content: nothing in them is markup)."""
    return Content("\n".join(r.text for r in rows).strip("\n"))


class QuestionScreen(ModalScreen[Verdict | None]):
    """One incident: diagnosis, change, reveal. Dismisses with the verdict (None: hidden)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Hide"),
        Binding("enter", "continue", "Continue", show=False),
    ]

    def __init__(
        self,
        question: Question,
        total: int,
        when: str,
        grade: Grade,
        predict: Predict | None = None,
    ) -> None:
        super().__init__()
        self._predict = predict
        self.question = question
        self.total = total
        self.when = when
        self._grade = grade
        self.step: Step = "diagnosis"
        self.rule: str | None = None
        self.verdict: Verdict | None = None
        self._changes = changes(question)

    def compose(self) -> ComposeResult:
        q = self.question
        with Vertical(id="question", classes="dialog") as box:
            box.border_title = f"incident {q.number} of {self.total} · {self.when}"
            yield Static(PROMPTS["diagnosis"], id="question-prompt")
            yield OptionList(*self._diagnoses(), id="question-options")
            with VerticalScroll(id="question-reveal"):
                yield Static(id="question-answer")
                yield Static(id="question-predicted")
            yield Static(HINTS["diagnosis"], id="question-hint", classes="dialog-hint")

    def on_mount(self) -> None:
        self.query_one("#question-reveal").display = False
        self.query_one(OptionList).focus()

    def _diagnoses(self) -> list[Option]:
        width = max(len(c.rule) for c in self.question.choices)
        return [Option(f"{c.rule:<{width}}  {c.title}", id=c.rule) for c in self.question.choices]

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        options = self.query_one(OptionList)
        if self.step == "diagnosis":
            self.rule = event.option.id
            self.step = "change"
            options.clear_options()
            options.add_options(Option(c.label, id=str(i)) for i, c in enumerate(self._changes))
            options.highlighted = 0
            self.query_one("#question-prompt", Static).update(
                Content.assemble(PROMPTS["change"], (f"   you said: {self.rule}", "$text-muted"))
            )
        elif self.step == "change" and self.rule is not None:
            change = self._changes[int(event.option.id or 0)]
            self.verdict = self._grade(self.question, change, self.rule)
            self.step = "reveal"
            options.display = False
            self.query_one("#question-prompt", Static).display = False
            self.query_one("#question-answer", Static).update(reveal(self.verdict))
            reveal_box = self.query_one("#question-reveal")
            reveal_box.display = True
            reveal_box.focus()
            self._start_prediction()
        self.query_one("#question-hint", Static).update(HINTS[self.step])

    def _start_prediction(self) -> None:
        """Read the store now (the replay stands at the incident) and run the twin off the
        loop; its rows replace "running the twin…" when it is done."""
        if self._predict is None:
            return
        started = self._predict()
        if callable(started):
            self._show_predicted(predicting_rows())
            predicting.run(self, started)
        else:
            self._show_predicted(started.rows)

    def _show_predicted(self, rows: list[Row]) -> None:
        self.query_one("#question-predicted", Static).update(predicted(rows))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        done = predicting.ended(event, self.question.finding)
        if done is not None:
            self._show_predicted(done.rows)

    def action_continue(self) -> None:
        """Enter on the reveal; a binding (not a key handler) so the key ends here, and does
        not go on to close whatever screen comes next."""
        if self.step == "reveal":
            self.dismiss(self.verdict)

    def action_close(self) -> None:
        self.dismiss(self.verdict)
