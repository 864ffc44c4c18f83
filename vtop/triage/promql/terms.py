"""The vocabulary every step of the PromQL export shares: options, the one error, literals.

The translation is split by what it translates (measures, formulas, conditions, whole alerts,
files); what they all speak is kept here, below them, so none of them imports a sibling for a
number format or an operator table: the options the caller gives, `NotExpressible` (the one
typed error a translation raises: why a rule, or part of one, has no PromQL equivalent), the
comparison operators, how numbers are written (strings: `vtop.sources.promql.quote`, vtop's one
PromQL quoter), and `Fragment`, the typed piece of PromQL the formula translator folds and
combines.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from vtop.knobs import KnobValue

PROMQL_OP = {
    "above": ">",
    "at_least": ">=",
    "below": "<",
    "at_most": "<=",
    "equals": "==",
    "not_equals": "!=",
}


class NotExpressible(Exception):
    """Why a condition (or formula) has no PromQL equivalent; one line."""


@dataclass(frozen=True, slots=True)
class Options:
    """How to export."""

    by: tuple[str, ...] = ("job", "instance")
    """Labels an alert is per (the target Prometheus scraped)."""
    resolution: str = ""
    """Subquery resolution (`[2m:15s]`); empty: the rule group's evaluation interval."""
    interval: str | None = None
    """The rule group's evaluation interval; None: Prometheus's global one."""
    group: str = "vtop"
    knobs: Mapping[str, KnobValue] = field(default_factory=dict)
    """`--knob name=value`: one value for every instance."""
    instance_knobs: Mapping[str, Mapping[str, KnobValue]] = field(default_factory=dict)
    """Per `instance` label (`host:port`), e.g. from a targets file's labels."""
    knob_sources: Mapping[str, str] = field(default_factory=dict)
    """Where the per-instance values came from (for annotations), e.g. `fleet.txt`."""


def literal(x: float) -> str:
    """A number as PromQL takes it."""
    if math.isfinite(x) and x == int(x) and abs(x) < 1e15:
        return str(int(x))
    return repr(float(x))


# -- typed PromQL fragments ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Fragment:
    """A PromQL fragment: `scalar` is a number literal (foldable), `vector` has the `by` labels,
    `filter` is a vector that exists where a condition holds."""

    text: str
    kind: str  # "scalar" | "vector" | "filter" | "string" | "bool"
    value: float | str | bool | None = None
