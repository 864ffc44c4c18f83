"""The closed loop of `vtop tune`: watch, let the twin choose, ask, restart, measure, keep the
best; every trial logged beside what the twin predicted for it.

Trial 0 is the server as it runs. Each round takes the top finding of the last watch whose
advice the twin can set (its recommendations, as the twin's search chose them under the goals:
the same values a report prints), asks before the restart unless told yes, restarts with every
change so far, waits for the server and its load, and measures the same window. A trial is
kept when it meets the goals at least as the best one did and its tokens/s is not worse than
the best's by more than `NOISE`; otherwise the best configuration is restored and the loop
stops, unless the trial gained tokens/s and missed only a latency bound (`overshot`): then the
loop closes in on the bound from the best while restarts remain, at the value where the line
through the two measured trials meets it (`between`), the twin having shown it cannot see
where the bound lies. A restarted server that shows another value than the one asked for (a
restart command that does not read the flags file) stops the loop too: its measurement would
be of the old configuration under the new name. It also stops when no such finding is left,
when the twin's whole search found no change to meet the goals, when the next change is
predicted to gain under `MIN_GAIN`, after `max_restarts` trials, or on Ctrl-C (the best
measured configuration is restored first, when the server runs another).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from vtop import fmt, knobs
from vtop.knobs import KnobValue
from vtop.report.document import Document, FindingDoc
from vtop.tune.server import Server
from vtop.whatif.goals import Goals

MIN_GAIN = 0.05
"""A next change predicted to gain less than this (on what it promises) is not worth a restart."""
NOISE = 0.03
"""Measured tokens/s this much under the best still counts as the same: two windows of the same
load differ by about this much on a steady server. A measured latency this much over a bound
still meets it, for the same reason."""


@dataclass(frozen=True, slots=True)
class Figures:
    """What a trial is judged on, measured over its window or predicted by the twin."""

    tokens_per_s: float | None = None
    preemptions_per_s: float | None = None
    ttft_p90_s: float | None = None
    itl_mean_s: float | None = None

    def line(self) -> str:
        """`1.2k tok/s, 0.50 preempt/s, TTFT p90 2.1s, ITL mean 39ms`."""
        return ", ".join(
            [
                f"{fmt.num(self.tokens_per_s)} tok/s",
                f"{_num(self.preemptions_per_s)} preempt/s",
                f"TTFT p90 {_seconds(self.ttft_p90_s)}",
                f"ITL mean {_seconds(self.itl_mean_s)}",
            ]
        )


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _seconds(x: float | None) -> str:
    return "-" if x is None else fmt.seconds(x)


def measured(doc: Document) -> Figures:
    """The figures a watch measured (window averages; TTFT p90 and the mean ITL over the
    window)."""
    signals: Any = doc["signals"]
    latency = doc["latency"]

    def avg(name: str) -> float | None:
        s = signals.get(name)
        return s.get("avg") if s else None

    return Figures(
        avg("generation_tokens_per_s"),
        avg("preemptions_per_s"),
        latency["ttft"]["p90"] if "ttft" in latency else None,
        latency["itl"]["mean"] if "itl" in latency else None,
    )


@dataclass(frozen=True, slots=True)
class Plan:
    """The next change: the finding it answers and the twin's figures for it."""

    rule: str
    changes: dict[str, KnobValue]
    predicted: Figures | None
    gain: float | None
    """The predicted improvement on what the finding's advice promises; None: not predicted."""
    line: str
    """The twin's prediction in words, or why it has none."""
    unchecked: str = ""
    """Why the twin did not judge this change ("": it did): the rule's formula stood, or the
    value lies between two measured trials."""
    short: str = ""
    """Why the twin expects this change to miss the goals ("": it meets them, or not judged)."""

    def flags(self) -> str:
        return knobs.flags(self.changes)


def _kept(out: Outcome) -> str:
    """A trial that met the goals, kept: a stop's words must not read as a failure."""
    best = out.best
    if best is None or best.number == 0 or not best.meets:
        return ""
    return f"trial {best.number} meets the goals and is kept; "


def plan(doc: Document) -> Plan | None:
    """The change the watch advises: the first firing finding that counts and has a
    recommendation the twin can set; None when there is none."""
    settable = set(knobs.twin_knobs())
    for f in doc["findings"]:
        recs = [r for r in f["recommendations"] if r["knob"] in settable]
        if f["state"] != "firing" or not f["counts"] or not recs:
            continue
        return _plan_of(f, {r["knob"]: r["to"] for r in recs})
    return None


def _plan_of(f: FindingDoc, changes: dict[str, KnobValue]) -> Plan:
    p = f.get("prediction")
    bands: Mapping[str, Any] = next(
        (r["predicted"] for r in f["recommendations"] if r.get("predicted")), {}
    )
    after = {name: b["after"] for name, b in bands.items()}
    names = ("generation_tokens_per_s", "preemptions_per_s", "ttft_p90", "itl_mean")
    predicted = Figures(*(after.get(name) for name in names)) if after else None
    search = p.get("search") if p else None
    return Plan(
        rule=f["rule"],
        changes=changes,
        predicted=predicted,
        gain=p["gain"] if p and p["confidence"] != "withheld" else None,
        line=p["line"] if p else "no prediction",
        unchecked=""
        if search and search["checked"] and p and p["confidence"] != "withheld"
        else "not checked by the twin: the rule's formula",
        short=search["note"]  # a search cut short (the report's time budget) ruled nothing out
        if search and search["checked"] and not (search["meets"] or search["cut_short"])
        else "",
    )


@dataclass(slots=True)
class Trial:
    """One configuration the server ran, what the twin predicted for it and what it did."""

    number: int
    changes: dict[str, KnobValue]
    """Every knob changed since the start, with its value ({} for the start)."""
    predicted: Figures | None
    measured: Figures
    verdict: str
    """The watch's verdict: `WARNING budget-too-small`, `OK`."""
    misses: tuple[str, ...]
    note: str = ""

    @property
    def meets(self) -> bool:
        return not self.misses

    def flags(self) -> str:
        if not self.changes:
            return "(as started)"
        return knobs.flags(self.changes)

    def error(self) -> float | None:
        """Measured tokens/s against predicted (0.1: measured 10 % above)."""
        p = self.predicted.tokens_per_s if self.predicted else None
        m = self.measured.tokens_per_s
        return None if not p or m is None else m / p - 1

    def as_json(self) -> dict[str, Any]:
        return {
            "trial": self.number,
            "changes": dict(self.changes),
            "flags": self.flags(),
            "predicted": dataclasses.asdict(self.predicted) if self.predicted else None,
            "measured": dataclasses.asdict(self.measured),
            "error": self.error(),
            "verdict": self.verdict,
            "meets_goals": self.meets,
            "misses": list(self.misses),
            "note": self.note,
        }


def misses(goals: Goals, m: Figures, start: Figures) -> tuple[str, ...]:
    """The goals measured figures `m` miss, as the twin's search judges its candidates (the
    ITL bound relative to the start's ITL)."""
    return goals.missed(
        tokens=m.tokens_per_s,
        preemptions=m.preemptions_per_s,
        itl=m.itl_mean_s,
        itl_today=start.itl_mean_s,
        ttft=m.ttft_p90_s,
        unknown="not measured",
        within=1 + NOISE,
    )


def unapplied(doc: Document, changes: Mapping[str, KnobValue]) -> list[str]:
    """Each change the restarted server does not run, as its own page or command line says
    (`max_num_seqs 16, not 64`), or as its behaviour shows (the batch held at 16 while
    requests waited); a knob only assumed from vLLM's defaults cannot be checked."""
    out = []
    for name, wanted in changes.items():
        k = doc["knobs"].get(name)
        if k is None or k["provenance"] not in ("metrics", "process", "inferred"):
            continue
        if knobs.format_value(k["value"]) != knobs.format_value(wanted):
            shown = knobs.format_value(k["value"])
            out.append(f"{name} {shown}, not {knobs.format_value(wanted)}")
    return out


def _kept_today(doc: Document) -> str:
    """The first counting finding whose search chose the server's own configuration, as
    `rule: how the twin chose`; "" when none did."""
    for f in doc["findings"]:
        p = f.get("prediction")
        search = p.get("search") if p else None
        if f["state"] == "firing" and f["counts"] and search and search.get("keeps_today"):
            return f"{f['rule']}: {search['note']}"
    return ""


def verdict(doc: Document) -> str:
    top = next((f for f in doc["findings"] if f["state"] == "firing" and f["counts"]), None)
    return f"{doc['status']} {top['rule']}" if top is not None else doc["status"]


def overshot(goals: Goals, trial: Trial, best: Trial, start: Figures) -> bool:
    """Whether `trial` went too far the right way: more tokens/s than the best (beyond the
    noise), and only a latency bound missed (no preemption beyond what the goals allow)."""
    t, b = trial.measured.tokens_per_s, best.measured.tokens_per_s
    if trial.meets or not best.meets or t is None or b is None or t <= b * (1 + NOISE):
        return False
    unbounded = Goals(allow_preemption=goals.allow_preemption, itl_growth=math.inf)
    return not misses(unbounded, trial.measured, start)


def bound_fraction(goals: Goals, good: Figures, bad: Figures) -> float:
    """How far from `good` toward `bad` the nearest latency bound that `bad` missed lies, each
    figure taken as a straight line between the two measured trials (a secant): 0 when `good`
    already sits at that bound, 0.5 where no missed bound has both figures. A step law flat at
    the bottom and linear above (the CPU's) is convex, so its secant lies above it and the
    value found meets the bound with room."""
    fractions = [
        max(0.0, (limit - g) / (b - g))
        for limit, g, b in (
            (goals.max_itl_s, good.itl_mean_s, bad.itl_mean_s),
            (goals.max_ttft_s, good.ttft_p90_s, bad.ttft_p90_s),
        )
        if limit is not None and g is not None and b is not None and g < b and limit < b
    ]
    return min(fractions, default=0.5)


def between(
    good: Mapping[str, KnobValue],
    bad: Mapping[str, KnobValue],
    start: Mapping[str, KnobValue],
    fraction: float = 0.5,
) -> dict[str, KnobValue] | None:
    """The changes `fraction` of the way from one trial's to another's (each knob not changed
    being as the server `start`ed): numbers moved from `good` toward `bad`, whole numbers
    rounded toward `good`, the rest alike; None when the two differ in a knob that has no
    value between (a dtype, a switch, a value not known) or nothing lies strictly between."""
    out = dict(good)
    for name in sorted(good.keys() | bad.keys()):
        lo, hi = good.get(name, start.get(name)), bad.get(name, start.get(name))
        if lo == hi:
            continue
        if not knobs.is_number(lo) or not knobs.is_number(hi):
            return None
        both_int = isinstance(lo, int) and isinstance(hi, int)
        step = (hi - lo) * fraction
        mid: KnobValue = lo + int(step) if both_int else round(lo + step, 2)
        if mid in (lo, hi):
            return None
        out[name] = mid
    return out if out != dict(good) else None


def better(trial: Trial, best: Trial) -> bool:
    """Whether `trial` may stand in for `best`: goals met at least as well, and tokens/s not
    worse than the best's by more than the noise."""
    if best.meets and not trial.meets:
        return False
    if trial.meets and not best.meets:
        return True
    t, b = trial.measured.tokens_per_s, best.measured.tokens_per_s
    return t is not None and (b is None or t >= b * (1 - NOISE))


@dataclass(slots=True)
class Outcome:
    trials: list[Trial] = field(default_factory=list)
    best: Trial | None = None
    stopped: str = ""
    """Why the loop ended, in a clause."""
    restarts: int = 0


class Tuner:
    """The loop over a `Server`; `observe` watches the server once it answers and carries
    load, and returns the report of the window, advised under the goals it is given: the
    user's, with a relative ITL bound made absolute at the start's ITL once trial 0 has
    measured it (each trial's own "today" would let the bound creep up 1.5x a restart)."""

    def __init__(
        self,
        server: Server,
        observe: Callable[[Goals], Document],
        goals: Goals,
        *,
        max_restarts: int = 3,
        confirm: Callable[[Plan], bool] = lambda plan: True,
        on_trial: Callable[[Trial], None] = lambda trial: None,
        say: Callable[[str], None] = lambda line: None,
    ) -> None:
        self.server = server
        self.observe = observe
        self.goals = goals
        self.max_restarts = max_restarts
        self.confirm = confirm
        self.on_trial = on_trial
        self.say = say
        self.outcome = Outcome()
        self._current: dict[str, KnobValue] = {}
        self._started_with: dict[str, KnobValue] = {}
        """The knobs the server ran at trial 0, as it showed or the user said (not vLLM's
        defaults: an assumed value is no end of a halving)."""

    def _measure(
        self, changes: dict[str, KnobValue], predicted: Figures | None, note: str
    ) -> tuple[Trial, Document]:
        doc = self.observe(self.goals)
        m = measured(doc)
        start = self.outcome.trials[0].measured if self.outcome.trials else m
        trial = Trial(
            len(self.outcome.trials),
            dict(changes),
            predicted,
            m,
            verdict(doc),
            misses(self.goals, m, start),
            note,
        )
        self.outcome.trials.append(trial)
        self.on_trial(trial)
        return trial, doc

    def _restart(self, changes: dict[str, KnobValue]) -> None:
        self.outcome.restarts += 1
        self._current = dict(changes)
        self.server.restart(changes)

    def run(self) -> Outcome:
        """The whole loop; Ctrl-C restores the best measured configuration, then re-raises."""
        try:
            self._loop()
        except KeyboardInterrupt:
            self.outcome.stopped = "interrupted"
            self._restore()
            raise
        return self.outcome

    def _restore(self) -> None:
        best = self.outcome.best
        if best is not None and best.changes != self._current:
            self.say(f"restoring the best measured configuration: {best.flags()}")
            self._restart(best.changes)

    def _loop(self) -> None:
        out = self.outcome
        trial, doc = self._measure({}, None, "start")
        out.best = trial
        self._started_with = {
            name: k["value"] for name, k in doc["knobs"].items() if k["provenance"] != "default"
        }
        self.goals = self.goals.anchored(trial.measured.itl_mean_s)
        while True:
            step = plan(doc)
            pending = [f["rule"] for f in doc["findings"] if f["state"] == "pending"]
            if step is None and pending:
                out.stopped = f"{_kept(out)}no verdict in the window ({', '.join(pending)} "
                out.stopped += "still pending): watch longer (--watch) to decide the next step"
                return
            kept = _kept_today(doc)
            if step is None and kept:
                out.stopped = f"the twin keeps today's configuration under the goals ({kept})"
                return
            if step is None:
                out.stopped = "no finding left that a knob the twin sets would fix"
                return
            if step.short:
                out.stopped = f"the twin expects no change to meet the goals: {step.short}"
                return
            if step.gain is not None and step.gain < MIN_GAIN:
                out.stopped = (
                    f"the next change ({step.flags()}) is predicted to gain "
                    f"{step.gain:.0%}, under {MIN_GAIN:.0%}"
                )
                return
            if out.restarts >= self.max_restarts:
                out.stopped = f"--max-restarts {self.max_restarts} reached"
                return
            if not self.confirm(step):
                out.stopped = "the restart was not confirmed"
                return
            changes = {**self._current, **step.changes}
            self._restart(changes)
            trial, doc = self._measure(changes, step.predicted, f"{step.rule}")
            if not self._applied(trial, doc):
                return
            if better(trial, out.best):
                out.best = trial
                continue
            if overshot(self.goals, trial, out.best, out.trials[0].measured):
                trial.note += "; past a latency bound"
                self._close_in(out.best, trial)
                return
            trial.note += "; worse: rolled back"
            out.stopped = f"trial {trial.number} measured worse than trial {out.best.number}"
            self._restore()
            return

    def _applied(self, trial: Trial, doc: Document) -> bool:
        """Whether the restarted server runs what `trial` asked for; if not, the loop stops
        and the best is restored (measuring the old configuration under the new name proves
        nothing)."""
        wrong = unapplied(doc, trial.changes)
        if not wrong:
            return True
        trial.note += "; not applied: " + "; ".join(wrong)
        self.outcome.stopped = (
            f"the restarted server runs {'; '.join(wrong)}: the restart did "
            "not apply the flags (does the server start from them?)"
        )
        self._restore()
        return False

    def _close_in(self, good: Trial, bad: Trial) -> None:
        """Close in on the latency bound between the best trial and one that went past it,
        while restarts remain: two measured points say more than the twin that overshot, so
        the next value is where the line through them meets the bound (`bound_fraction`), not
        simply halfway. The first such trial takes the restart a rollback would have cost; the
        best is restored at the end if the server runs another."""
        out = self.outcome
        while True:
            fraction = bound_fraction(self.goals, good.measured, bad.measured)
            changes = between(good.changes, bad.changes, self._started_with, fraction)
            if changes is None:
                out.stopped = (
                    f"trial {bad.number} went past a latency bound and no value between it "
                    f"and trial {good.number} is expected to meet it"
                )
                break
            if out.restarts >= self.max_restarts:
                out.stopped = (
                    f"--max-restarts {self.max_restarts} reached, between trials "
                    f"{good.number} and {bad.number}"
                )
                break
            where = f"between trials {good.number} and {bad.number}"
            line = f"none (trial {good.number} met the goals, trial {bad.number} missed "
            line += f"{', '.join(bad.misses)}; the bound lies {fraction:.0%} of the way)"
            step = Plan("between", changes, None, None, line, unchecked=where)
            if not self.confirm(step):
                out.stopped = "the restart was not confirmed"
                break
            self._restart(changes)
            trial, doc = self._measure(changes, None, where)
            if not self._applied(trial, doc):
                return
            if better(trial, good):
                out.best = good = trial
            else:
                trial.note += "; worse"
                bad = trial
        self._restore()
