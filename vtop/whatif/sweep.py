"""A sweep: the configurations a user names, each run by the twin, and the one the goals choose.

`vtop whatif --set KNOB=V … --sweep KNOB=V1,V2,…` asks the twin about configurations the user
picked, where a finding's search (`vtop.whatif.search`) picks its own. The choice among them is
the search's, by the same code: each row is a `Trial` judged by the `Goals` (by default the
seeds' sweet spot: no sustained preemption, the mean ITL at most 1.5x today's; `--max-itl-ms`,
`--max-ttft-s`, `--allow-preemption` as on every mode), the best is the most predicted tokens/s
among the rows that meet them (`search.best_of`), and a twin whose self-check could not tell the
rows apart (withheld, or of low confidence: `search.cannot_choose`) chooses none and says why.

The values are typed and bounded by the knob catalog (`vtop.knobs.parse`), for the knobs the
twin can set (`predict.KNOB_FIELDS`); a bad one is a one-line ValueError naming it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vtop import knobs
from vtop.knobs import KnobValue
from vtop.whatif.goals import Goals
from vtop.whatif.predict import KNOB_FIELDS, WhatIf
from vtop.whatif.search import Trial, best_of, cannot_choose


def parse_value(name: str, text: str) -> KnobValue:
    """A knob's value as its type, within its range (`vtop.knobs`); ValueError, one line,
    names the knob and what it may be."""
    if name not in KNOB_FIELDS:
        raise ValueError(f"unknown knob {name!r}; a what-if can set {', '.join(KNOB_FIELDS)}")
    return knobs.parse(name, text)


def configurations(sets: Sequence[str], sweep: str | None) -> list[dict[str, KnobValue]]:
    """The configurations asked for: the `--set`s, once per `--sweep` value if there is one."""
    base: dict[str, KnobValue] = {}
    for item in sets:
        name, eq, text = item.partition("=")
        if not eq:
            raise ValueError(f"--set {item}: expected KNOB=VALUE")
        base[name.strip()] = parse_value(name.strip(), text.strip())
    if sweep is None:
        return [base] if base else []
    name, eq, texts = sweep.partition("=")
    if not eq or not texts:
        raise ValueError(f"--sweep {sweep}: expected KNOB=V1,V2,...")
    return [base | {name.strip(): parse_value(name.strip(), t.strip())} for t in texts.split(",")]


@dataclass(frozen=True, slots=True)
class Sweep:
    """Each configuration's trial in the order asked, and the one the goals choose."""

    goals: Goals
    trials: tuple[Trial, ...]
    chosen: Trial | None
    """The best row; None when none meets the goals or the twin may not choose."""
    note: str
    """Why no row was chosen, in one clause ("" when one was)."""

    def line(self) -> str:
        """`best: max_num_seqs=32 (most gen tok/s with no sustained preemption, …)`, or why
        no row is."""
        if self.chosen is None:
            return f"best: none, {self.note}"
        return f"best: {label(self.chosen)} ({self.goals.describe()})"


def label(trial: Trial) -> str:
    """`max_num_seqs=32, kv_cache_dtype=fp8`: a row's changes, as the user typed them."""
    return ", ".join(f"{k}={knobs.format_value(v)}" for k, v in trial.changes.items())


def run(whatif: WhatIf, configs: Sequence[dict[str, KnobValue]], goals: Goals) -> Sweep:
    """Predict every configuration (ValueError: one the twin cannot start, naming it) and
    choose among them under `goals`."""
    trials = []
    for changes in configs:
        prediction = whatif.predict(changes)
        trials.append(Trial(dict(changes), prediction, goals.misses(prediction)))
    why = cannot_choose(whatif.check)
    if why:
        return Sweep(goals, tuple(trials), None, f"the twin does not choose: {why}")
    chosen = best_of(trials)
    if chosen is None:
        return Sweep(goals, tuple(trials), None, f"no row meets the goals ({goals.describe()})")
    return Sweep(goals, tuple(trials), chosen, "")
