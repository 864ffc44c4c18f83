"""What a finding's advice will buy: its recommendations run through the twin, together.

A user who reads `--max-num-seqs 32` asks at once how much faster, and at what cost in
latency. `Advisor.advise` answers for one finding: the twin fitted to the watched server
(`predict.prepare_from`, self-checked against today) runs every recommendation of the finding that
it can set, all at once (FP8 KV and a lower max_num_seqs go together, so they are predicted
together), on the observed workload.

Each recommendation promises to move one figure (`PROMISES`: a raise of max_num_seqs promises
generated tokens/s, FP8 KV fewer preemptions, …). Where the twin predicts less than `MIN_GAIN`
on it, the advice is demoted: the finding says so and names what limits the server instead
(the load it is sent, or compute: a bigger batch whose every step is slower by as much),
rather than promising a fix.

Cost: a what-if runs the twin for minutes of virtual time (about a second). The report asks
once per finding; the TUI reads the store on its loop (`Advisor.read`, milliseconds) and runs
the twin on a worker thread (`Advisor.advise`), and `Advisor` keeps the answer until the
recommendation changes or the workload moves by more than `WORKLOAD_STEP` (a new fit).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from vtop.figures import ENDPOINT, FIGURE, ITL_MEAN, KV_USAGE, RUNNING, Scope
from vtop.knobs import KnobValue, format_value, is_number
from vtop.model import Finding, Knob, Recommendation
from vtop.sim.calibration import StepPoint
from vtop.whatif.goals import Goals
from vtop.whatif.predict import (
    KNOB_FIELDS,
    Band,
    Observation,
    Prediction,
    WhatIf,
    observe,
    prepare_from,
)
from vtop.whatif.search import Choice, kv_is_wall, search
from vtop.whatif.watched import Watched

PREDICT_WINDOW_S = 300.0
"""The most of a server's history a finding's prediction is fitted to: five minutes, the
window the twin's workload estimate and self-check were proven on."""
MIN_GAIN = 0.10
"""Below this predicted improvement on the figure it promises, a recommendation is demoted."""
WORKLOAD_STEP = 1.25
"""A fit is reused while the observed token rate and batch stay within this factor."""
SERVER_KNOBS = ("model", "served_model_name", "quantization", "tensor_parallel_size")
"""The knobs that change the step law itself: points of one server at configurations that
differ in other knobs only (the scheduler's) may be fitted together."""
MAX_CONFIGURATIONS = 8
"""Configurations whose step points are kept (the most recent)."""

PROMISES: dict[tuple[str, str], str] = {
    ("max_num_seqs", "raise"): "generation_tokens_per_s",
    ("max_num_seqs", "lower"): "preemptions_per_s",
    ("kv_cache_dtype", "set"): "preemptions_per_s",
    ("gpu_memory_utilization", "raise"): "preemptions_per_s",
    ("max_model_len", "lower"): "preemptions_per_s",
    ("block_size", "set"): "preemptions_per_s",
    ("max_num_batched_tokens", "raise"): "ttft_p50",
    ("max_num_batched_tokens", "lower"): "itl_mean",
    # From 0 (no cap) to a cap: "up" in number, a tighter cap in effect; short prompts'
    # first tokens stop waiting behind long prefills.
    ("long_prefill_token_threshold", "raise"): "ttft_p50",
    ("long_prefill_token_threshold", "set"): "itl_mean",
    ("long_prefill_token_threshold", "lower"): "itl_mean",
    ("enable_prefix_caching", "enable"): "ttft_p50",
}
"""(knob, direction) -> the figure the recommendation promises to move."""
HIGHER_IS_BETTER = frozenset({"generation_tokens_per_s"})
SHOWN = ("generation_tokens_per_s", "queue_p50", "ttft_p90", "itl_mean", "preemptions_per_s")
"""The figures a prediction's line states (the promised one first), when predicted."""


def twin_changes(f: Finding) -> dict[str, KnobValue]:
    """The finding's recommendations the twin can set, as one configuration."""
    return {r.knob: r.new_value for r in f.recommendations if r.knob in KNOB_FIELDS}


def promised(r: Recommendation) -> str | None:
    """The figure `r` promises to move, or None when it names none the twin predicts."""
    return PROMISES.get((r.knob, r.direction))


def gain(name: str, now: float, after: float) -> float | None:
    """The improvement on figure `name` as a share of today's (negative: worse); None when
    today's is nothing to improve on."""
    if now <= 0 or not math.isfinite(now) or not math.isfinite(after):
        return None
    change = (after - now) / now
    return change if name in HIGHER_IS_BETTER else -change


@dataclass(frozen=True, slots=True)
class Advice:
    """A finding's predicted effect: the prediction, the figure promised, and whether the
    twin backs the promise."""

    rule: str
    prediction: Prediction
    promised: str | None
    gain: float | None
    """The predicted improvement on `promised` (0.5: 50 % better); None when not predicted."""
    limit: str = ""
    """What limits the server instead, when the gain is under `MIN_GAIN`."""
    choice: Choice | None = None
    """The twin's search around the finding's formula (`vtop.whatif.search`): `prediction` is
    its chosen configuration's; None when no search ran (the twin could not start)."""
    knobs: Mapping[str, Knob] = field(default_factory=dict)
    """The server's knobs as read: the value today of a knob only the choice sets."""

    @property
    def demoted(self) -> bool:
        return self.gain is not None and self.gain < MIN_GAIN

    def line(self) -> str:
        """`gen tok/s 150 → 305 (+103%, ±15%); queue p50 16s → 300ms (-98%, ±9%); …`, or why
        there is no prediction."""
        p = self.prediction
        if not p.figures:
            return f"prediction withheld: {p.reason or 'nothing the twin can predict'}"
        if self.choice is not None and self.choice.keeps_today:
            return (
                "no change: today's configuration is the best the twin found under the goals "
                f"(confidence {p.confidence})"
            )
        names = [n for n in (self.promised, *SHOWN) if n is not None]
        parts = []
        for name in dict.fromkeys(names):
            band = p.figures.get(name)
            if band is None or (name != self.promised and band.now == band.after == 0):
                continue
            fig = FIGURE[name]
            text = f"{fig.brief} {today(name, band)} → {fig.screen(band.after)}"
            if band.now > 0 and name != "kv_usage":
                moved = f"{(band.after - band.now) / band.now:+.0%}"
                if band.after > 0:
                    # A band wider than the value is its floor's (0.0167 preemptions/s, +- 0.1):
                    # "±600%" says less than where it ends.
                    spread = (band.high - band.after) / band.after
                    moved += (
                        f", ±{spread:.0%}" if spread <= 1 else f", up to {fig.screen(band.high)}"
                    )
                text += f" ({moved})"
            parts.append(text)
        if self.promised is not None and self.promised in p.withheld:
            said = FIGURE[self.promised].brief
            parts.insert(0, f"{said} not predicted (the self-check found it off)")
        return "; ".join(parts) + f" (confidence {p.confidence})"

    def choice_lines(self) -> list[tuple[str, str]]:
        """How the configuration predicted was chosen, as (label, text): what the twin set
        when it moved off the formula's values, `chosen` (`unchecked` where it could not
        judge) with the goals, and each trade-off beside it (`instead`); none when the
        prediction is withheld (its line already says why nothing was chosen)."""
        c = self.choice
        if c is None or self.prediction.confidence == "withheld":
            return []
        if c.keeps_today:
            out = [("the twin's choice", f"no change ({c.chosen.label()}, as today)")]
        else:
            out = [("the twin's choice", c.chosen.label())] if c.moved else []
        out.append(("chosen" if c.checked else "unchecked", c.line()))
        return out + [("instead", t.line()) for t in c.alternatives]

    def verdict(self) -> str:
        """The sentence that demotes the advice; "" when the twin backs it."""
        if not self.demoted or self.promised is None or self.gain is None:
            return ""
        if self.choice is not None and self.choice.keeps_today:
            return ""  # the choice's own lines say why nothing changes
        band = self.prediction.figures[self.promised]
        fig = FIGURE[self.promised]
        return (
            f"the twin predicts {fig.brief} {today(self.promised, band)} → "
            f"{fig.screen(band.after)} ({abs(self.gain):.0%} "
            f"{'better' if self.gain >= 0 else 'worse'}): under "
            f"{MIN_GAIN:.0%}, this change alone will not fix it; {self.limit}"
        )


def today(name: str, band: Band) -> str:
    """Today's figure as the band states it, and what the server showed where the two are
    apart (`38s (seen 28.9s)`, a twin's steady state beside a queue still filling): a line
    that printed the twin's alone would tell the user a today their own screen contradicts."""
    fig = FIGURE[name]
    text = fig.screen(band.now)
    if band.seen is not None and band.seen_apart(name):
        text += f" (seen {fig.screen(band.seen)})"
    return text


def _limit(p: Prediction, promised: str) -> str:
    """What holds the server back when the change does not move `promised`, from the twin's
    figures."""
    kv = p.figures.get("kv_usage")
    if promised == "preemptions_per_s" and kv is not None:
        return (
            f"the KV pool still fills ({KV_USAGE.brief} {KV_USAGE.screen(kv.after)} after): "
            "this load needs more room than the change makes"
        )
    run = p.figures.get("running")
    itl = p.figures.get("itl_mean")
    if run is not None and run.now > 0 and run.after < run.now * (1 + MIN_GAIN):
        return (
            f"the load limits it: the batch stays at {RUNNING.screen(run.after)} running, "
            "so the clients send no more than the server already serves"
        )
    if itl is not None and run is not None and itl.now > 0 and itl.after > itl.now:
        return (
            f"compute limits it: the batch grows {today('running', run)} → "
            f"{RUNNING.screen(run.after)} but every step slows as much ({ITL_MEAN.brief} "
            f"{today('itl_mean', itl)} → {ITL_MEAN.screen(itl.after)}), so the same work is "
            "only reshuffled"
        )
    return "what limits this server is not this knob"


def chosen_recommendations(finding: Finding, advice: Advice | None) -> tuple[Recommendation, ...]:
    """The finding's recommendations as the twin's choice sets them: a knob it chose another
    value for carries that value (its explanation says the formula's), a knob only the choice
    sets is added; none the twin sets when its choice is the server's own configuration (no
    change meets the goals better: `Choice.keeps_today`); the finding's own when the twin kept
    the formula's configuration or made no choice."""
    choice = advice.choice if advice is not None else None
    if choice is not None and choice.keeps_today:
        return tuple(r for r in finding.recommendations if r.knob not in KNOB_FIELDS)
    if choice is None or not choice.moved:
        return finding.recommendations
    chosen = choice.chosen.changes
    said_by_twin = choice.chosen.prediction.confidence
    confidence: Literal["high", "medium", "low"] = (
        "low" if said_by_twin == "withheld" else said_by_twin
    )
    out: list[Recommendation] = []
    for r in finding.recommendations:
        if r.knob not in KNOB_FIELDS:
            out.append(r)
        elif r.knob in chosen:
            value = chosen[r.knob]
            if value == r.new_value:
                out.append(r)
                continue
            said = f"the twin's choice; the rule's formula gave {format_value(r.new_value)}"
            if r.explanation:
                said += f": {r.explanation}"
            out.append(
                replace(
                    r,
                    new_value=value,
                    direction=_direction(r.current, value),
                    explanation=said,
                    confidence=confidence,
                    formula_value=r.new_value,
                )
            )
    for knob, value in chosen.items():
        if all(r.knob != knob for r in finding.recommendations):
            chosen_by_twin = "the twin's choice"
            current = advice.knobs.get(knob) if advice is not None else None
            out.append(
                Recommendation(
                    knob,
                    current,
                    value,
                    _direction(current, value),
                    chosen_by_twin,
                    {},
                    explanation=chosen_by_twin,
                )
            )
    return tuple(out)


def _direction(current: Knob | None, value: KnobValue) -> Literal["raise", "lower", "set"]:
    before = current.value if current is not None else None
    if not is_number(before) or not is_number(value):
        return "set"
    return "raise" if value > before else "lower"


class Advisor:
    """Predictions for the findings of the endpoints it is asked about, kept until they go
    stale: one fit per endpoint and workload, one prediction per finding and changes.

    `read` takes what a prediction needs from the store (cheap; on the thread that feeds the
    store) and `advise` runs the twin on it (seconds; any thread, one at a time).
    `budget_s`: the time a report that asks it spends predicting at most (None: the report's
    own, a few seconds); `vtop tune`, about to restart a server, gives it a minute."""

    def __init__(self, goals: Goals | None = None, *, budget_s: float | None = None) -> None:
        self.goals = goals or Goals()
        self.budget_s = budget_s
        self._fits: dict[str, tuple[tuple[object, ...], WhatIf]] = {}
        self._advice: dict[tuple[str, str], tuple[tuple[object, ...], Advice]] = {}
        self._windows: dict[tuple[object, ...], tuple[StepPoint, ...]] = {}
        """(server, configuration) -> the step points of its latest fit: a server seen at
        several configurations (restarted with other flags, as `vtop tune` does) has its law
        fitted to all of them (`predict.prepare_from`'s `earlier`)."""

    @staticmethod
    def read(watched: Watched, window_s: float, *, scope: Scope = ENDPOINT) -> Reading:
        """The server as a prediction sees it, and the stamp that says when a fit is stale."""
        seen = observe(watched, window_s, scope=scope)
        knobs = tuple(sorted((k, str(v.value)) for k, v in watched.knobs.items()))
        stamp = (*_workload_stamp(seen.observed), knobs, watched.gpu_name)
        same_server = tuple(
            str(watched.knobs[name].value) if name in watched.knobs else None
            for name in SERVER_KNOBS
        )
        server = (watched.store.endpoint, watched.gpu_name, *same_server)
        return Reading(watched.store.endpoint, seen, stamp, server, knobs)

    def advise(
        self, finding: Finding, reading: Reading, *, deadline: float | None = None
    ) -> Advice | None:
        """What the finding's recommendations will buy; None when the twin can set none.
        `deadline`: when the search stops running configurations (`search.search`)."""
        changes = twin_changes(finding)
        if not changes:
            return None
        cached_fit = self._fits.get(reading.endpoint)
        if cached_fit is not None and cached_fit[0] == reading.stamp:
            whatif = cached_fit[1]
        else:
            whatif = prepare_from(reading.seen, earlier=self._earlier(reading))
            self._fits[reading.endpoint] = (reading.stamp, whatif)
            self._remember(reading, whatif)
        key = (finding.endpoint, finding.rule)
        stamp = (
            reading.stamp,
            tuple(sorted((k, str(v)) for k, v in changes.items())),
            self.goals,
        )
        cached = self._advice.get(key)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        advice = advise(
            finding, whatif, changes, self.goals, deadline=deadline, knobs=reading.seen.knobs
        )
        if advice.choice is None or not advice.choice.cut_short:  # a later look may finish it
            self._advice[key] = (stamp, advice)
        return advice

    def _earlier(self, reading: Reading) -> list[StepPoint]:
        """The points of the same server at its other configurations."""
        server, config = reading.server, reading.configuration
        return [
            p
            for (other_server, other_config), points in self._windows.items()
            if other_server == server and other_config != config
            for p in points
        ]

    def _remember(self, reading: Reading, whatif: WhatIf) -> None:
        key = (reading.server, reading.configuration)
        self._windows.pop(key, None)
        self._windows[key] = whatif.step.window_points()
        while len(self._windows) > MAX_CONFIGURATIONS:
            del self._windows[next(iter(self._windows))]  # the oldest

    def fitted(self, endpoint: str) -> WhatIf | None:
        """The endpoint's latest fit (its self-check is the predictions' footing), if any."""
        cached = self._fits.get(endpoint)
        return cached[1] if cached is not None else None


@dataclass(frozen=True, slots=True)
class Reading:
    """What `Advisor.read` took of one endpoint, and its stamp."""

    endpoint: str
    seen: Observation
    stamp: tuple[object, ...]
    server: tuple[object, ...] = ()
    """What makes a step law the same: the endpoint, its GPU, model, dtype, parallelism."""
    configuration: tuple[object, ...] = ()
    """Every knob it runs with: a server restarted with other flags is another one."""


def _workload_stamp(observed: Mapping[str, float | None]) -> tuple[int | None, ...]:
    """The observed load in steps of `WORKLOAD_STEP`: equal while it has not moved materially."""
    out: list[int | None] = []
    for name in ("generation_tokens_per_s", "running", "waiting"):
        value = observed.get(name)
        out.append(None if value is None else round(math.log(1 + value, WORKLOAD_STEP)))
    return tuple(out)


def prediction_reading(watched: Watched | None, finding: Finding) -> Reading | str:
    """What a prediction of `finding` needs, read from its server's store now (cheap, on the
    thread that feeds it), the same for the report, the screens and the quiz: the last
    `PREDICT_WINDOW_S` at most; or why there is nothing to read (`watched` None: the
    endpoint was never polled)."""
    if not twin_changes(finding):
        return "the twin sets none of these knobs"
    if watched is None:
        return f"no polls of {finding.endpoint} to fit the twin to"
    times = watched.store.times()
    span = times[-1] - times[0] if len(times) >= 2 else 0.0
    if span <= 0:
        return "too few polls yet to fit the twin to"
    try:
        return Advisor.read(watched, min(PREDICT_WINDOW_S, span))
    except Exception as exc:  # a prediction's failure costs its line, never the caller's run
        return twin_failed(exc)


def twin_failed(exc: Exception) -> str:
    """Why a prediction is missing, when the twin (or the read) raised."""
    said = str(exc).strip()
    return f"the twin failed ({type(exc).__name__}{': ' + said if said else ''})"


def unavailable(finding: Finding, reason: str) -> Advice:
    """A finding's advice with no prediction, and why (the twin failed)."""
    changes = twin_changes(finding)
    return Advice(finding.rule, Prediction(changes, {}, {}, "withheld", reason), None, None)


def advise(
    finding: Finding,
    whatif: WhatIf,
    changes: Mapping[str, KnobValue],
    goals: Goals | None = None,
    *,
    deadline: float | None = None,
    knobs: Mapping[str, Knob] | None = None,
) -> Advice:
    """Search the configurations around `changes` (the finding's, together) under `goals`
    (`vtop.whatif.search`, until `deadline`) and judge the promise of the finding's first
    recommendation that promises a figure on the configuration chosen. `knobs`: the server's
    as read, for the value today of a knob only the choice sets."""
    choice = search(
        whatif,
        changes,
        goals or Goals(),
        kv_wall=kv_is_wall(whatif.check.observed, finding.rule),
        deadline=deadline,
    )
    prediction = choice.chosen.prediction
    promise = next((n for r in finding.recommendations if (n := promised(r)) is not None), None)
    band = prediction.figures.get(promise) if promise is not None else None
    moved = gain(promise, band.now, band.after) if band is not None and promise else None
    limit = (
        _limit(prediction, promise) if moved is not None and moved < MIN_GAIN and promise else ""
    )
    return Advice(finding.rule, prediction, promise, moved, limit, choice, dict(knobs or {}))
