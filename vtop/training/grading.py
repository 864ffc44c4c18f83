"""How a training answer is graded, what the reveal says, and the score.

Grading: the diagnosis is worth 2 points and the change 2 more, on every question, so that
whether a change is asked for gives nothing away. When the finding recommends a change, naming
one of its knobs is worth 1, and the right direction (raise, lower, set, enable, disable) or a
value within `VALUE_TOLERANCE` of the recommendation (the same setting, for non-numeric knobs)
1 more; a knob the rule's own advice lists, that its conditions did not pick this time, counts
as right in kind. When it recommends none (the client, not the server, has to change),
answering "no server knob" is worth both. Answers are graded without any notion of how they
were typed: the replay screen and the text quiz (`vtop.cli.train`) hand in the same `Answer`.

The reveal says what the finding's advice would buy (`vtop.whatif.advice`), where the twin can
set its knobs: it runs when the answer is revealed (`grade`, about a second), so a learner who
stops early pays for no twin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vtop.knobs import KnobValue
from vtop.training.questions import Direction, Question
from vtop.triage.explain import shown_formula
from vtop.whatif.advice import Advice, Advisor, twin_failed

VALUE_TOLERANCE = 0.25
"""An answer's value within this share of the recommended one is right."""


@dataclass(frozen=True, slots=True)
class Answer:
    """What the learner said; `knob` None is "no server knob"."""

    rule: str
    knob: str | None = None
    value: KnobValue = None
    direction: Direction | None = None


@dataclass(frozen=True, slots=True)
class Verdict:
    question: Question
    answer: Answer
    diagnosis: bool
    knob: bool
    value: bool
    predicted: tuple[str, ...] = ()
    """The reveal's predicted effect (`predicted_lines`), when the question had a reading."""
    why: tuple[str, ...] = ()
    """Why the answer scored as it did, a line for the diagnosis and one for the change."""

    @property
    def points(self) -> int:
        return 2 * self.diagnosis + self.knob + self.value

    def lines(self) -> list[str]:
        """The reveal: right or wrong, the finding, its evidence and its recommendations."""
        f = self.question.finding
        out = [
            f"{'right' if self.diagnosis else 'not quite'}: it was {f.rule} ({f.title}); "
            f"{self.points} of {self.question.points} points",
            *(f"  {line}" for line in self.why),
            f.summary,
        ]
        out.extend(f"  {name}: {value}" for name, value in f.evidence)
        out.extend(
            f"  change: {r.flag}" + _why(r.change, shown_formula(r.explanation, r.formula))
            for r in f.recommendations
        )
        if not f.recommendations:
            out.append("  change: no server knob; the fix is outside vLLM's flags")
        out.extend(self.predicted)
        return out


def predicted_lines(advice: Advice | None) -> tuple[str, ...]:
    """The reveal's `predicted: gen tok/s 150 → 305 (+103%, ±15%); …`, when the twin does
    not back the advice the sentence that demotes it, and how the twin chose the setting
    (`chosen: …`, `instead: …`) as the reports say it."""
    if advice is None:
        return ()
    verdict = advice.verdict()
    out = [f"  predicted: {advice.line()}", *((f"    but {verdict}",) if verdict else ())]
    return (*out, *(f"  {label}: {text}" for label, text in advice.choice_lines()))


def predict(question: Question, advisor: Advisor | None = None) -> tuple[str, ...]:
    """The question's predicted effect as the reveal's lines (the twin runs here: about a
    second); nothing without a reading."""
    if question.reading is None:
        return ()
    try:
        advice = (advisor or Advisor()).advise(question.finding, question.reading)
    except Exception as exc:  # a failed prediction costs the learner a line, not the quiz
        return (f"  predicted: unavailable: {twin_failed(exc)}",)
    return predicted_lines(advice)


def grade(question: Question, answer: Answer, advisor: Advisor | None = None) -> Verdict:
    """`knob`: the right knob, or rightly none; `value`: the right direction or value; and
    the advice's predicted effect, where the question has a reading (`predict`, under
    `advisor`'s goals)."""
    f = question.finding
    diagnosis = answer.rule == f.rule
    named = "right" if diagnosis else f"{answer.rule or 'none'} is not it"
    said = [f"diagnosis: {named} ({2 * diagnosis} of 2)"]
    predicted = predict(question, advisor)
    if not f.recommendations:
        none = answer.knob is None
        said.append(
            "change: right, no server knob fixes this (2 of 2)"
            if none
            else f"change: {answer.knob} is no fix here: the fix is outside vLLM's flags (0 of 2)"
        )
        return Verdict(question, answer, diagnosis, none, none, predicted, tuple(said))
    recs = {r.knob: r for r in f.recommendations}
    listed = dict(question.fixes)
    rec = recs.get(answer.knob or "")
    knob = rec is not None or answer.knob in listed
    if rec is not None and answer.value is not None:
        value = _close(answer.value, rec.new_value)
        near = "is" if value else "is not"
        why = f"{answer.value} {near} within {VALUE_TOLERANCE:.0%} of {rec.new_value}"
    elif rec is not None:
        value = answer.direction == rec.direction
        why = f"the advice is to {rec.direction} it" + (
            "" if value else f", not {answer.direction or 'leave it'}"
        )
    elif answer.knob in listed:
        # A fix the rule's own advice lists, that its conditions did not pick here (raise
        # gpu_memory_utilization where it is 0.92 already): right in kind.
        direction = listed[answer.knob or ""]
        value = answer.direction == direction
        why = f"{f.rule} lists it ({direction}), though here it advised " + ", ".join(
            r.flag for r in f.recommendations
        )
    else:
        value = False
        why = (
            f"{f.rule} does not change {answer.knob}" if answer.knob else "a server knob fixes this"
        )
    points = int(knob) + int(value)
    said.append(f"change: {answer.knob or 'none'}: {why} ({points} of 2)")
    return Verdict(question, answer, diagnosis, knob, value, predicted, tuple(said))


def _close(given: KnobValue, wanted: KnobValue) -> bool:
    if given is None or wanted is None:
        return False
    if isinstance(wanted, bool) or isinstance(given, bool):
        return isinstance(wanted, bool) and isinstance(given, bool) and given == wanted
    if isinstance(wanted, int | float) and isinstance(given, int | float):
        if wanted == 0:
            return given == 0
        return math.isfinite(given) and abs(given - wanted) <= VALUE_TOLERANCE * abs(wanted)
    return str(given).strip().lower() == str(wanted).strip().lower()


@dataclass(slots=True)
class Score:
    verdicts: list[Verdict]

    @property
    def points(self) -> int:
        return sum(v.points for v in self.verdicts)

    @property
    def possible(self) -> int:
        return sum(v.question.points for v in self.verdicts)

    def summary(self, asked: int | None = None) -> str:
        """The score; `asked`: how many questions the trace had, when the session ended
        before all were answered (or before the first)."""
        right = sum(v.diagnosis for v in self.verdicts)
        n = len(self.verdicts)
        if asked == 0 or (asked is None and not n):
            return "no incident to diagnose in this trace"
        of = f" ({n} of {asked} incidents answered)" if asked is not None and asked > n else ""
        return f"score {self.points} of {self.possible}: {right} of {n} diagnoses right{of}"


def _why(*parts: str) -> str:
    """`  (down from 256; demand p95 … : 104)`, or nothing when there is nothing to say."""
    said = "; ".join(p for p in parts if p)
    return f"  ({said})" if said else ""
