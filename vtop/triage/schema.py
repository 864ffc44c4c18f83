"""The shape of a rule once loaded: frozen values the loader builds and the engine only reads.

Conditions are a small tree, not code: comparisons of windowed measures (each one PromQL
function over one operand), knob tests, and `all` / `any` / `not`. That keeps every rule
exportable (`Measure.promql`) and lets the engine share one computed aggregate among every rule
that asks for it (measures are hashable values, and the per-evaluation cache is keyed by them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from vtop.knobs import KnobValue
from vtop.model import Severity
from vtop.triage.expr import Expr

Op = Literal["above", "at_least", "below", "at_most", "equals", "not_equals"]
OPS: tuple[Op, ...] = ("above", "at_least", "below", "at_most", "equals", "not_equals")
CLEAR = {
    "above": "clear_below",
    "at_least": "clear_below",
    "below": "clear_above",
    "at_most": "clear_above",
}
"""The recovery threshold each comparison may carry (Grafana-style hysteresis)."""
PROMQL_OP = {
    "above": ">",
    "at_least": ">=",
    "below": "<",
    "at_most": "<=",
    "equals": "==",
    "not_equals": "!=",
}

Function = Literal[
    "last",
    "avg_over_time",
    "max_over_time",
    "min_over_time",
    "quantile_over_time",
    "rate",
    "increase",
    "histogram_quantile",
    "histogram_mean",
    "share_over_time",
    "value",
]
FUNCTIONS: tuple[Function, ...] = (
    "last",
    "avg_over_time",
    "max_over_time",
    "min_over_time",
    "quantile_over_time",
    "rate",
    "increase",
    "histogram_quantile",
    "histogram_mean",
    "share_over_time",
    "value",
)
GAUGE_FUNCTIONS = frozenset(
    {"last", "avg_over_time", "max_over_time", "min_over_time", "quantile_over_time"}
)

Threshold = float | Expr
Direction = Literal["raise", "lower", "set", "enable", "disable"]


@dataclass(frozen=True, slots=True)
class Operand:
    """A canonical or derived signal; `label` selects one label value (ALL = every value)."""

    name: str
    label: str = ""

    def __str__(self) -> str:
        return f'{self.name}{{"{self.label}"}}' if self.label else self.name


@dataclass(frozen=True, slots=True)
class Sample:
    """A per-poll comparison, only inside `share_over_time`."""

    operand: Operand
    op: Op
    threshold: Threshold


@dataclass(frozen=True, slots=True)
class All:
    items: tuple[Cond, ...]


@dataclass(frozen=True, slots=True)
class AnyOf:
    items: tuple[Cond, ...]


@dataclass(frozen=True, slots=True)
class Not:
    item: Cond


@dataclass(frozen=True, slots=True)
class IfKnown:
    """Holds when `item` holds or cannot be judged (no NVML, a series this vLLM lacks)."""

    item: Cond


@dataclass(frozen=True, slots=True)
class Measure:
    """One PromQL function over one operand (or a sub-condition, for share_over_time).

    `since_start`: over everything the server counted since it started (its counters and
    histograms at the latest poll, against zero at its start), not over a window of polls;
    `window_s` is then 0. Unknown where that history cannot be trusted (see
    `measure.Snapshot.since_start_ok`)."""

    fn: Function
    operand: Operand | None
    window_s: float
    q: float | None = None
    sub: Cond | None = None
    since_start: bool = False


@dataclass(frozen=True, slots=True)
class Compare:
    measure: Measure
    op: Op
    threshold: Threshold
    clear: Threshold | None = None
    line: int = 0


@dataclass(frozen=True, slots=True)
class KnobIs:
    knob: str
    op: Op
    value: KnobValue


Cond = Compare | KnobIs | All | AnyOf | Not | IfKnown | Sample


@dataclass(frozen=True, slots=True)
class ValueDef:
    """A named number a rule computes for its text and formulas: a measure or an expression."""

    name: str
    measure: Measure | None = None
    expr: Expr | None = None
    label: str = ""
    """How the value reads where a recommendation's arithmetic is explained (else its name)."""


@dataclass(frozen=True, slots=True)
class RecSpec:
    knob: str
    direction: Direction
    value: Expr
    minimum: Expr | None = None
    maximum: Expr | None = None
    rounding: Literal["int", "float"] = "int"
    when: Expr | None = None
    tradeoff: str = ""
    tradeoff_names: tuple[str, ...] = ()
    """The placeholders `tradeoff` reads."""
    withheld: str = ""
    """Why the change is not advised when `if` holds but the value would not move the knob
    the way `direction` promises (a raise capped by the KV fit); shown on the finding."""
    withheld_names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Escalation:
    severity: Severity
    when: Cond


@dataclass(frozen=True, slots=True)
class Requires:
    """Evidence a rule needs before it may speak (Robusta KRR's "not enough data"): seconds
    covered by successful polls since vtop attached or the server restarted, at any poll
    interval, and requests finished in that time."""

    evidence_s: float = 60.0
    finished: int = 0


@dataclass(frozen=True, slots=True)
class Decisive:
    """The fast path: evidence far past the thresholds, on every sample, fires the rule after
    `evidence_s` (and at least `MIN_SAMPLES` polls) instead of `requires` + `for`."""

    evidence_s: float
    when: Cond


@dataclass(frozen=True, slots=True)
class Suspect:
    """A likely cause that is not yet a verdict: while `when` holds and neither path's
    condition does, the rule is "not enough data", saying what would decide it (`waits_for`).
    One drain of a wave is not waves; a report that saw one must not say OK either."""

    when: Cond
    waits_for: str


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    title: str
    severity: Severity
    order: int
    when: Cond
    summary: str
    file: str = ""
    line: int = 0
    description: str = ""
    source: str = ""
    for_s: float = 0.0
    keep_firing_for_s: float = 0.0
    requires: Requires = Requires()
    decisive: Decisive | None = None
    suspect: Suspect | None = None
    explains: tuple[str, ...] = ()
    kv_wall: bool = False
    values: tuple[ValueDef, ...] = ()
    evidence: tuple[tuple[str, str], ...] = ()
    recommend: tuple[RecSpec, ...] = ()
    escalate: tuple[Escalation, ...] = ()

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"
