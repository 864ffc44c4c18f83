"""Training on recorded incidents: where to pause, what to ask, how to grade, the score.

`vtop --replay FILE --train` replays a trace with the findings hidden. Wherever a rule starts
firing, the replay pauses and the learner names the diagnosis (from the whole rule catalog,
not just the rules that fire in this trace, so the answer is not given away) and the knob to
change, with its new value; then the finding is revealed with its evidence, as the rule saw it
at that moment, and graded. The score comes at the end.

This module is the headless core, shared by the replay screen and the line-by-line runner in
`vtop.cli.train`: it finds the questions with the report's own pass over the trace
(`replay_collector`), so training asks exactly about what a report would flag, and it grades
answers without any notion of how they were typed.

Grading: the diagnosis is worth 2 points and the change 2 more, on every question, so that
whether a change is asked for gives nothing away. When the finding recommends a change, naming
one of its knobs is worth 1, and the right direction (raise, lower, set, enable, disable) or a
value within 25% of the recommendation (the same setting, for non-numeric knobs) 1 more. When
it recommends none (the client, not the server, has to change), answering "no server knob" is
worth both. The knobs offered are the same on every question, in the same order.

The reveal says what the finding's advice would buy (`vtop.whatif.advice`), where the twin
can set its knobs. The store is read where the rule first fires, during the pass (`questions`
keeps that `Reading` on the question, milliseconds); the twin runs when the answer is
revealed (`grade`, about a second), so a learner who stops early pays for no twin. The replay
screen builds its questions without readings and runs the twin on a worker instead.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from vtop.knobs import KnobValue
from vtop.model import Finding
from vtop.monitor import Monitor
from vtop.report.collect import Collector, FindingsFn, monitor_findings
from vtop.trace.reader import Warn
from vtop.triage.explain import shown_formula
from vtop.whatif.advice import Advice, Advisor, Reading, prediction_reading, twin_failed

VALUE_TOLERANCE = 0.25

Direction = Literal["raise", "lower", "set", "enable", "disable"]
DIRECTIONS: tuple[Direction, ...] = ("raise", "lower", "set", "enable", "disable")
SETTINGS = {"kv_cache_dtype", "long_prefill_token_threshold"}
"""Knobs set to a value they did not have (fp8; a threshold where there was none)."""


def moves(knob: str) -> tuple[Direction, ...]:
    """The directions a knob can change in: switches turn on or off, settings are set."""
    if knob.startswith("enable_"):
        return ("enable", "disable")
    if knob in SETTINGS:
        return ("set",)
    return ("raise", "lower")


@dataclass(frozen=True, slots=True)
class Choice:
    """A diagnosis the learner can pick: a rule of the catalog."""

    rule: str
    title: str


@dataclass(frozen=True, slots=True)
class Question:
    """A pause in the replay: at `t`, `finding` (hidden until revealed) began firing."""

    number: int
    t: float
    endpoint: str
    finding: Finding
    choices: tuple[Choice, ...]
    knobs: tuple[str, ...]
    """Knobs offered for the change: every knob a rule may recommend, in a fixed order."""
    reading: Reading | None = field(default=None, compare=False, repr=False)
    """The store as the rule saw it when it fired, for the twin (None: no prediction here)."""
    fixes: tuple[tuple[str, str], ...] = ()
    """Every (knob, direction) the rule's own advice lists, whether or not this firing
    recommended it (`if:` conditions aside): each is a right answer."""

    @property
    def points(self) -> int:
        return 4

    def changes(self) -> list[tuple[str, Direction]]:
        """Every (knob, direction) a learner may pick, in a fixed order (`moves`)."""
        return [(k, d) for k in self.knobs for d in moves(k)]


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


CONFIG_KNOBS = (
    "max_num_seqs",
    "max_num_batched_tokens",
    "gpu_memory_utilization",
    "max_model_len",
    "kv_cache_dtype",
    "enable_prefix_caching",
)
"""The configuration a question shows of the server, whatever the incident."""

COMMON_KNOBS = (
    *CONFIG_KNOBS,
    "enable_chunked_prefill",
    "long_prefill_token_threshold",
    "tensor_parallel_size",
    "api_server_count",
)
"""Every knob a shipped rule may recommend (a test holds them to it), and the usual suspects:
the same list on every question, so the list itself never hints at the answer."""


def questions(
    path: str,
    catalog: Sequence[Choice],
    *,
    findings: FindingsFn = monitor_findings,
    warn: Warn | None = None,
) -> list[Question]:
    """One question per rule (and endpoint) that begins firing in the trace, in time order."""
    from vtop.report.run import replay_collector

    readings: dict[tuple[str, str], Reading | str] = {}

    def watched(monitor: Monitor) -> Iterable[Finding]:
        # Where a rule first fires is where its question pauses: read the store there.
        found = list(findings(monitor))
        for f in found:
            if f.state == "firing" and (f.endpoint, f.rule) not in readings:
                reading = prediction_reading(monitor.watched(f.endpoint), f)
                readings[(f.endpoint, f.rule)] = reading
        return found

    collector = replay_collector(path, findings=watched, warn=warn)
    return questions_of(
        collector, catalog, {k: r for k, r in readings.items() if isinstance(r, Reading)}
    )


def questions_of(
    collector: Collector,
    catalog: Sequence[Choice],
    readings: Mapping[tuple[str, str], Reading] | None = None,
) -> list[Question]:
    """The questions of a finished pass over a trace (the replay screen makes its own pass);
    `readings`: the store where each (endpoint, rule) first fired, for its prediction."""
    out: list[Question] = []
    rules = collector.monitor.engine.by_id
    for t, f in collector.onsets():
        recommended = tuple(r.knob for r in f.recommendations)
        knobs = tuple(dict.fromkeys((*COMMON_KNOBS, *recommended)))
        known = {c.rule for c in catalog}
        choices = tuple(catalog) if f.rule in known else (*catalog, Choice(f.rule, f.title))
        reading = (readings or {}).get((f.endpoint, f.rule))
        rule = rules.get(f.rule)
        listed = tuple((spec.knob, spec.direction) for spec in rule.recommend) if rule else ()
        fixes = tuple(dict.fromkeys((*((r.knob, r.direction) for r in f.recommendations), *listed)))
        out.append(Question(len(out) + 1, t, f.endpoint, f, choices, knobs, reading, fixes))
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
