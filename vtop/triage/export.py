"""vtop's rules as Prometheus alerting rules: `vtop rules export --format prometheus`.

A fleet that runs Prometheus should not need vtop running to be told "the KV cache is the
wall"; the same rules, with the same thresholds, can be evaluated by Prometheus and routed by
Alertmanager. Rule conditions are structured data whose every measure is one PromQL function
(`vtop.triage.schema`), so the export is a translation, not a rewrite:

- every canonical signal becomes an aggregate per instance (`sum by (job, instance)`, `max` for
  KV usage), with the catalog's aliases across vLLM versions joined by `or` (the first alias
  wins, as in `PageReader`); counters are rated before they are summed, histograms summed by
  `le` before `histogram_quantile`; a gauge function over an aggregate is a subquery
  (`avg_over_time((…)[2m:])`), which also makes the export need no recording rules and read
  the history Prometheus already has from its first evaluation;
- derived signals and context values use the PromQL their table in `triage.derived` states;
- a comparison is a PromQL filter (`>` / `>=` …), `all` is `and`, `any` is `or`, `not` is
  pushed down to the comparisons (so unknown stays unknown, as in vtop), `if_known` is
  "holds, or the measure is absent"; `share_over_time` is `avg_over_time` of a 0/1 subquery;
- the recovery thresholds (Grafana-style hysteresis) use Prometheus's own alert state:
  `fire-condition or (clear-condition and on(job, instance) ALERTS{alertname=…})`, which is
  exactly vtop's "while pending or firing, compare against the clear level";
- `for` and `keep_firing_for` carry over as they are (Prometheus >= 2.42), an escalation is a
  second alert of the same name with severity critical, and `explains` becomes Alertmanager
  inhibit rules (`--format alertmanager`), which is what Alertmanager has for root causes.

Knobs no metric exposes (`max_num_seqs`, `max_num_batched_tokens`, …) become label-joined
vectors, one value per instance, in this order: a series `vtop_knob_<name>{instance=…}` if
anyone publishes one, the per-instance values of `--targets FILE` labels, `--knob name=value`,
then vLLM's default (the same default vtop assumes); a knob with none of these leaves the
conditions that need it unknown, and such a rule is listed as not exported. Knobs that
`vllm:cache_config_info` carries as labels are compared by label when a condition tests them
for equality (`enable_prefix_caching == false`); PromQL cannot read a label as a number, so
numeric uses need a value as above. Each alert's annotations say which knobs it assumed and
how to set them, and carry the recommendation formula (with its PromQL, when it translates).

What vtop does that Prometheus cannot is said in annotations rather than faked: `requires`
(vtop's "not enough data yet"), windows clamped at a server restart, and the kv-wall guard on
advice.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from vtop import __version__, durations
from vtop.model import KnobValue, Severity
from vtop.signals.catalog import BY_NAME, Signal
from vtop.sources.discovery import defaults as version_defaults
from vtop.triage.derived import CONTEXT_WINDOW_S, KNOBS
from vtop.triage.engine import MIN_DECISIVE_POLLS
from vtop.triage.expr import Expr
from vtop.triage.measure import SINCE_START_LOAD_FLOOR, SINCE_START_MIN_S
from vtop.triage.recommend import bounded
from vtop.triage.schema import (
    All,
    AnyOf,
    Compare,
    Cond,
    IfKnown,
    KnobIs,
    Measure,
    Not,
    Op,
    Operand,
    RecSpec,
    Rule,
    Sample,
    Threshold,
    ValueDef,
)
from vtop.usage import OneLineParser

PROMQL_OP = {
    "above": ">",
    "at_least": ">=",
    "below": "<",
    "at_most": "<=",
    "equals": "==",
    "not_equals": "!=",
}
NEGATE: dict[Op, Op] = {
    "above": "at_most",
    "at_least": "below",
    "below": "at_least",
    "at_most": "above",
    "equals": "not_equals",
    "not_equals": "equals",
}
CACHE_CONFIG_LABELS = {
    "block_size": "block_size",
    "num_gpu_blocks": "num_gpu_blocks",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "kv_cache_dtype": "cache_dtype",
    "enable_prefix_caching": "enable_prefix_caching",
    "kv_cache_max_concurrency": "kv_cache_max_concurrency",
}
"""Knobs `vllm:cache_config_info` carries as labels (values as Python `str()`)."""
MEASURED_BY_PROMETHEUS = {"up": "up", "scrape_latency": "scrape_duration_seconds"}
"""vtop's own per-scrape signals and what Prometheus records of each scrape."""
UNAVAILABLE = {
    "gpu_mem_total": "only vtop's NVML reader measures GPU memory in all",
    "gpu_power_limit": "only vtop's NVML reader reads the power limit",
    "scrape_bytes": "Prometheus records scrape sizes only with the extra-scrape-metrics "
    "feature flag",
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


@dataclass(slots=True)
class Exported:
    """The alerting rules, and the rules that could not be exported, with why."""

    alerts: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    inhibits: list[dict[str, Any]] = field(default_factory=list)
    group: str = "vtop"
    interval: str | None = None


def alert_name(rule_id: str) -> str:
    """`memory-ceiling` -> `VtopMemoryCeiling`."""
    return "Vtop" + "".join(part.capitalize() for part in rule_id.split("-"))


def _num(x: float) -> str:
    """A number as PromQL takes it."""
    if math.isfinite(x) and x == int(x) and abs(x) < 1e15:
        return str(int(x))
    return repr(float(x))


def _label_value(value: KnobValue) -> str:
    """A knob value as `vllm:cache_config_info` writes it (Python `str()`)."""
    return str(value)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


# -- typed PromQL fragments ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Q:
    """A PromQL fragment: `scalar` is a number literal (foldable), `vector` has the `by` labels,
    `filter` is a vector that exists where a condition holds."""

    text: str
    kind: str  # "scalar" | "vector" | "filter" | "string" | "bool"
    value: float | str | bool | None = None


class _Translator:
    """PromQL for one rule's conditions, values and formulas."""

    def __init__(self, rule: Rule, options: Options) -> None:
        self.rule = rule
        self.o = options
        self.by = ", ".join(options.by)
        self.universe = f"group by ({self.by}) (vllm:num_requests_running)"
        self.knobs_used: dict[str, str] = {}
        self.values: dict[str, ValueDef] = {d.name: d for d in rule.values}
        self._defaults = {k: v.value for k, v in version_defaults(None, None, None).items()}
        self.partial: dict[str, None] = {}
        """Why branches of an `any` were left out (ordered, once each)."""
        self.lenient = False
        """True while translating advice: a knob nobody gave is then an empty vector (the
        formula's `known()` fallback or nothing), not a reason to leave the rule out."""

    # -- windows -----------------------------------------------------------------------------

    def _range(self, window_s: float) -> str:
        return f"[{durations.exact(window_s)}]"

    def _sub(self, window_s: float) -> str:
        return f"[{durations.exact(window_s)}:{self.o.resolution}]"

    # -- signals -----------------------------------------------------------------------------

    def _signal(self, name: str) -> Signal:
        if name in UNAVAILABLE:
            raise NotExpressible(f"uses {name}: {UNAVAILABLE[name]}")
        return BY_NAME[name]

    def _matchers(self, sig: Signal, label: str) -> str:
        if label and label != "*" and sig.label is not None:
            return "{" + f"{sig.label}={_quote(label)}" + "}"
        return ""

    def _alternatives(self, parts: Sequence[str]) -> str:
        return parts[0] if len(parts) == 1 else "(" + " or ".join(parts) + ")"

    def instant(self, operand: Operand) -> str:
        """The per-instance value of a gauge or instant derived signal at each evaluation."""
        name = operand.name
        if name in MEASURED_BY_PROMETHEUS:
            return f"max by ({self.by}) ({MEASURED_BY_PROMETHEUS[name]})"
        if name in BY_NAME:
            sig = self._signal(name)
            if sig.label == "gpu" and not operand.label:
                return self.instant(Operand("gpu_util_max"))
            agg = "max" if sig.combine == "max" else "sum"
            m = self._matchers(sig, operand.label)
            return self._alternatives(
                [f"{agg} by ({self.by}) ({alias}{m})" for alias in sig.aliases]
            )
        running, waiting = self.instant(Operand("running")), self.instant(Operand("waiting"))
        if name == "gauges_lie":
            # "the poll before was empty too" from the last two samples themselves (idelta),
            # not from an `offset` that can land on the same sample or skip one
            gauges = (self.gauge_delta(Operand(n), 60.0) for n in ("running", "waiting"))
            tokens = self.counter("idelta", Operand("generation_tokens"), 60.0)
            return (f"((({running} + {waiting}) == bool 0) * (({' + '.join(gauges)}) == bool 0) "
                    f"* ({tokens} > bool 0))")  # fmt: skip
        if name == "demand":
            return f"({running} + {waiting})"
        if name == "idle":
            return f"(({running} + {waiting}) == bool 0)"
        if name == "kv_tokens_per_seq":
            kv, cap = self.instant(Operand("kv_usage")), self.knob("kv_capacity_tokens")
            return f"(({kv} > 0) * {cap} / ({running} > 0))"
        if name == "kv_used_tokens":
            return f"({self.instant(Operand('kv_usage'))} * {self.knob('kv_capacity_tokens')})"
        if name == "batch_fill":
            return f"({running} / {self.knob('max_num_seqs')})"
        if name in ("kv_spread", "running_imbalance"):
            sig = BY_NAME["kv_usage" if name == "kv_spread" else "running"]
            parts = []
            for a in sig.aliases:
                hi, lo = f"max by ({self.by}) ({a})", f"min by ({self.by}) ({a})"
                body = f"({hi} - {lo})" if name == "kv_spread" else f"({hi} / clamp_min({lo}, 1))"
                parts.append(f"({body} and (count by ({self.by}) ({a}) > 1))")
            return self._alternatives(parts)
        if name == "gpu_util_max":
            return f"max by ({self.by}) (DCGM_FI_DEV_GPU_UTIL)"
        if name in ("replica_kv_spread", "replica_running_ratio", "replica_kv_min"):
            return self.replica(name)
        raise NotExpressible(f"no PromQL for the signal {name!r}")

    def replica(self, name: str) -> str:
        """A replica signal (`vtop.triage.replicas`): each instance against the emptiest
        instance with the same `model_name` and no queue; absent when alone."""
        running = name == "replica_running_ratio"
        sig = BY_NAME["running" if running else "kv_usage"]
        parts = []
        for a in sig.aliases:
            per = f"{'sum' if running else 'max'} by ({self.by}, model_name) ({a})"
            room = f"sum by ({self.by}, model_name) (vllm:num_requests_waiting) == 0"
            low = f"min by (model_name) ({per} and on ({self.by}, model_name) ({room}))"
            if name == "replica_kv_spread":
                body = f"{per} - on (model_name) group_left {low}"
            elif running:
                body = f"{per} / on (model_name) group_left clamp_min({low}, 1)"
            else:
                body = f"{per} * 0 + on (model_name) group_left {low}"
            parts.append(f"max by ({self.by}) (({body}) and on (model_name) "
                         f"(count by (model_name) ({per}) > 1))")  # fmt: skip
        return self._alternatives(parts)

    def gauge_delta(self, operand: Operand, window_s: float) -> str:
        """The change of a gauge between its last two samples (summed over engines)."""
        sig = self._signal(operand.name)
        m, w = self._matchers(sig, operand.label), self._range(window_s)
        return self._alternatives([f"sum by ({self.by}) (idelta({a}{m}{w}))" for a in sig.aliases])

    def _over(self, fn: str, series: str, window_s: float | None) -> str:
        """`fn(series[W])`; over everything since the server started (`window_s` None): the
        cumulative series itself, per second of uptime for a rate."""
        if window_s is not None:
            return f"{fn}({series}{self._range(window_s)})"
        return f"({series} / {self.uptime()})" if fn == "rate" else series

    def uptime(self) -> str:
        """Seconds since the API server started, per instance."""
        starts = BY_NAME["api_start_time"].aliases
        return self._alternatives([f"(time() - max by ({self.by}) ({a}))" for a in starts])

    def trusted_history(self) -> str:
        """Where the server's own history stands for it now (`measure.since_start_ok`): up for
        a minute, and its token rate over 5 min at least half its average since it started
        (Prometheus knows no restart it did not see in the counters themselves)."""
        gen = Operand("generation_tokens")
        now, average = self.counter("rate", gen, 300.0), self.counter("rate", gen, None)
        floor = _num(SINCE_START_LOAD_FLOOR)
        return (f"(({self.uptime()} >= {_num(SINCE_START_MIN_S)}) and on ({self.by}) "
                f"({now} >= {floor} * {average}))")  # fmt: skip

    def counter(self, fn: str, operand: Operand, window_s: float | None) -> str:
        sig = self._signal(operand.name)
        m = self._matchers(sig, operand.label)
        return self._alternatives(
            [f"sum by ({self.by}) ({self._over(fn, f'{a}_total{m}', window_s)})"
             for a in sig.aliases]
        )  # fmt: skip

    def hist_quantile(self, q: float, name: str, window_s: float | None) -> str:
        sig = self._signal(name)
        parts = []
        for a in sig.aliases:
            buckets = f"{a}_bucket" if window_s is None else self._over("rate", f"{a}_bucket",
                                                                         window_s)  # fmt: skip
            parts.append(f"histogram_quantile({_num(q)}, sum by ({self.by}, le) ({buckets}))")
        return self._alternatives(parts)

    def hist_part(self, part: str, name: str, window_s: float | None, fn: str = "rate") -> str:
        sig = self._signal(name)
        return self._alternatives(
            [f"sum by ({self.by}) ({self._over(fn, f'{a}_{part}', window_s)})"
             for a in sig.aliases]
        )  # fmt: skip

    def ratio(self, num: str, den: str) -> str:
        """num / den where den > 0 (vtop: unknown otherwise)."""
        return f"({num} / ({den} > 0))"

    def window_value(self, name: str, w: float | None) -> str:
        """A window-derived signal (`value:`), per its PromQL in `triage.derived`."""
        if name == "prefix_hit_rate":
            return self.ratio(
                self.counter("increase", Operand("prefix_cache_hits"), w),
                self.counter("increase", Operand("prefix_cache_queries"), w),
            )
        if name in ("queue_share_of_ttft", "prefill_share_of_ttft"):
            part = "queue_time" if name.startswith("queue") else "prefill_time"
            return self.ratio(
                self.hist_part("sum", part, w, "increase"),
                self.hist_part("sum", "ttft", w, "increase"),
            )
        if name == "iteration_fill":
            mean = self.ratio(
                self.hist_part("sum", "iteration_tokens", w, "increase"),
                self.hist_part("count", "iteration_tokens", w, "increase"),
            )
            return f"({mean} / {self.knob('max_num_batched_tokens')})"
        if name == "engine_steps_per_s":
            return self.hist_part("count", "iteration_tokens", w)
        if name == "decode_concurrency":
            tokens = self.counter("rate", Operand("generation_tokens"), w)
            itl = self.ratio(self.hist_part("sum", "itl", w), self.hist_part("count", "itl", w))
            return f"({tokens} * {itl})"
        if w is None:
            raise NotExpressible(f"{name} has no meaning since the server started")
        if name == "prompt_quiet":
            steps = self.counter("idelta", Operand("prompt_tokens"), 60.0)
            return f"avg_over_time(({steps} == bool 0){self._sub(w)})"
        if name == "demand_dispersion":
            d = self.instant(Operand("demand"))
            sub = self._sub(w)
            return self.ratio(f"stdvar_over_time(({d}){sub})", f"avg_over_time(({d}){sub})")
        if name in ("prompt_len_spread", "ttft_spread"):
            sig = "prompt_len" if name.startswith("prompt") else "ttft"
            return self.ratio(self.hist_quantile(0.99, sig, w), self.hist_quantile(0.5, sig, w))
        if name == "ttft_p95_imbalance":
            parts = []
            for a in BY_NAME["ttft"].aliases:
                h = (
                    f"histogram_quantile(0.95, sum by ({self.by}, model_name, engine, le) "
                    f"(rate({a}_bucket{self._range(w)})))"
                )
                spread = self.ratio(f"max by ({self.by}) ({h})", f"min by ({self.by}) ({h})")
                parts.append(f"({spread} and (count by ({self.by}) ({h}) > 1))")
            return self._alternatives(parts)
        if name == "length_finish_share":
            length = Operand("requests_finished", "length")
            return self.ratio(
                self.counter("increase", length, w),
                self.counter("increase", Operand("requests_finished"), w),
            )
        raise NotExpressible(f"no PromQL for the window signal {name!r}")

    def measure(self, m: Measure) -> str:
        if m.since_start:
            return f"({self._measure(m, None)} and on ({self.by}) {self.trusted_history()})"
        return self._measure(m, m.window_s)

    def _measure(self, m: Measure, w: float | None) -> str:
        fn, operand = m.fn, m.operand
        if w is None and fn not in ("value", "rate", "increase", "histogram_quantile",
                                    "histogram_mean"):  # fmt: skip
            raise NotExpressible(f"{fn} has no meaning since the server started")
        if fn == "share_over_time":
            assert m.sub is not None and w is not None
            return f"avg_over_time(({self.sample(m.sub)}){self._sub(w)})"
        assert operand is not None
        if fn == "value":
            return self.window_value(operand.name, w)
        if fn in ("rate", "increase"):
            return self.counter(fn, operand, w)
        if fn == "histogram_quantile":
            return self.hist_quantile(m.q if m.q is not None else 0.5, operand.name, w)
        if fn == "histogram_mean":
            return self.ratio(
                self.hist_part("sum", operand.name, w), self.hist_part("count", operand.name, w)
            )
        x = self.instant(operand)
        if fn == "last":
            return x
        assert w is not None  # a gauge function: the loader gives it a window
        if fn == "quantile_over_time":
            q = m.q if m.q is not None else 0.5
            return f"quantile_over_time({_num(q)}, ({x}){self._sub(w)})"
        return f"{fn}(({x}){self._sub(w)})"

    # -- knobs ---------------------------------------------------------------------------------

    def knob(self, name: str) -> str:
        """A per-instance vector of a knob's numeric value (see the module docstring)."""
        per = {
            inst: v for inst, k in self.o.instance_knobs.items() if (v := k.get(name)) is not None
        }
        default = self.o.knobs.get(name, self._defaults.get(name))
        for v in (*per.values(), default):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)):
                raise NotExpressible(f"knob {name} = {v!r} is not a number")
        u = self.universe
        parts = [f"({u} * on (instance) group_left max by (instance) (vtop_knob_{name}))"]
        if per:
            consts = " or ".join(
                f'label_replace(vector({_num(float(v))}), "instance", {_quote(i)}, "", "")'
                for i, v in sorted(per.items())
            )
            parts.append(f"({u} * on (instance) group_left () ({consts}))")
        if default is not None:
            assert isinstance(default, int | float)
            parts.append(f"({u} * {_num(float(default))})")
        self.knobs_used[name] = self._knob_note(name, per, default)
        if len(parts) == 1 and self.lenient:
            self.knobs_used[name] += " (none given: unknown unless published)"
        elif len(parts) == 1 and name in CACHE_CONFIG_LABELS | {"kv_capacity_tokens": ""}:
            raise NotExpressible(
                f"needs {name} as a number: vllm:cache_config_info has it only as a label, "
                f"which PromQL cannot read as a number; give --knob {name}=N or a "
                f"{name}=N label per instance in --targets"
            )
        elif len(parts) == 1:
            raise NotExpressible(f"needs {name}, which no metric exposes; give --knob {name}=N")
        return "(" + " or ".join(parts) + ")"

    def _knob_note(self, name: str, per: Mapping[str, KnobValue], default: KnobValue) -> str:
        where = self.o.knob_sources.get(name, "--targets")
        bits = [f"vtop_knob_{name}{{instance=…}} if published"]
        if per:
            bits.append(f"{len(per)} instance(s) from {where}")
        if name in self.o.knobs:
            bits.append(f"else {self.o.knobs[name]} (--knob)")
        elif default is not None:
            bits.append(f"else {default} (vLLM's default; no metric exposes it)")
        return f"{name}: " + ", ".join(bits)

    def knob_test(self, cond: KnobIs) -> str:
        """A knob condition as a filter vector."""
        name, op, value = cond.knob, cond.op, cond.value
        label = CACHE_CONFIG_LABELS.get(name)
        if label is not None and op in ("equals", "not_equals"):
            m = "=" if op == "equals" else "!="
            self.knobs_used[name] = f"{name}: the {label} label of vllm:cache_config_info"
            return (
                f"group by ({self.by}) (vllm:cache_config_info"
                f"{{{label}{m}{_quote(_label_value(value))}}})"
            )
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise NotExpressible(f"knob test {name} {op} {value!r} has no numeric PromQL form")
        return f"({self.knob(name)} {PROMQL_OP[op]} {_num(float(value))})"

    # -- conditions ------------------------------------------------------------------------------

    def threshold(self, t: Threshold) -> _Q:
        if isinstance(t, int | float):
            return _Q(_num(float(t)), "scalar", float(t))
        return self.expr(t)

    def cond(self, c: Cond, active: bool) -> str:
        """A condition as a filter: present, per instance, where it holds."""
        if isinstance(c, Compare):
            op, thr = c.op, c.threshold
            if active and c.clear is not None:
                op = "at_least" if c.op in ("above", "at_least") else "at_most"
                thr = c.clear
            t = self.threshold(thr)
            if t.kind not in ("scalar", "vector"):
                raise NotExpressible(f"threshold {thr!r} is not a number")
            return f"{self.measure(c.measure)} {PROMQL_OP[op]} {t.text}"
        if isinstance(c, KnobIs):
            return self.knob_test(c)
        if isinstance(c, All):
            return "(" + "\nand\n".join(f"({self.cond(i, active)})" for i in c.items) + ")"
        if isinstance(c, AnyOf):
            # A branch PromQL cannot express is left out, and said so: the alert then fires
            # on the others only (never where vtop would not).
            kept = []
            for item in c.items:
                try:
                    kept.append(f"({self.cond(item, active)})")
                except NotExpressible as exc:
                    self.partial.setdefault(str(exc), None)
            if not kept:
                raise NotExpressible("; ".join(self.partial))
            return "(" + "\nor\n".join(kept) + ")"
        if isinstance(c, Not):
            return self.cond(negate(c.item), active)
        if isinstance(c, IfKnown):
            known = " and ".join(f"({self.measure(m)})" for m in measures(c.item))
            if not known:
                raise NotExpressible("if_known over a knob test")
            return (
                f"(({self.cond(c.item, active)})\nor\n"
                f"({self.universe} unless on ({self.by}) ({known})))"
            )
        raise NotExpressible(f"{type(c).__name__} outside share_over_time")

    def sample(self, c: Cond) -> str:
        """A per-evaluation 0/1 vector for a share_over_time sub-condition."""
        if isinstance(c, Sample):
            t = self.threshold(c.threshold)
            x = self.instant(c.operand)
            return f"({x} {PROMQL_OP[c.op]} bool {t.text})"
        if isinstance(c, All):
            return "(" + " * ".join(self.sample(i) for i in c.items) + ")"
        if isinstance(c, AnyOf):
            return "clamp_max(" + " + ".join(self.sample(i) for i in c.items) + ", 1)"
        if isinstance(c, Not):
            return f"(1 - {self.sample(c.item)})"
        if isinstance(c, IfKnown):
            return f"({self.sample(c.item)} or {self.universe})"
        if isinstance(c, KnobIs):
            return f"(({self.knob_test(c)} * 0 + 1) or ({self.universe} * 0))"
        raise NotExpressible(f"{type(c).__name__} inside share_over_time")

    # -- expressions ---------------------------------------------------------------------------

    def expr(self, e: Expr) -> _Q:
        tree = e.tree.value if isinstance(e.tree, ast.Expr) else e.tree
        return self._node(tree, e.text)

    def _vec(self, q: _Q) -> str:
        """A fragment as a vector (a number becomes the number for every instance)."""
        if q.kind == "scalar":
            return f"({self.universe} * {q.text})"
        if q.kind in ("vector", "filter"):
            return q.text
        raise NotExpressible(f"{q.text} is not a number")

    def _name(self, name: str) -> _Q:
        if name in self.values:
            d = self.values[name]
            if d.measure is not None:
                return _Q(self.measure(d.measure), "vector")
            assert d.expr is not None
            return self.expr(d.expr)
        if name in KNOBS:
            return _Q(self.knob(name), "vector")
        w = CONTEXT_WINDOW_S
        if name == "demand_p95":
            return _Q(
                self.measure(Measure("quantile_over_time", Operand("demand"), w, 0.95)), "vector"
            )
        if name == "tokens_per_seq":
            return _Q(
                self.measure(Measure("quantile_over_time", Operand("kv_tokens_per_seq"), w, 0.9)),
                "vector",
            )
        if name == "kv_fit":
            per = self._name("tokens_per_seq").text
            return _Q(f"(0.9 * {self.knob('kv_capacity_tokens')} / {per})", "vector")
        if name == "uptime_s":
            return _Q(f"(time() - max by ({self.by}) (process_start_time_seconds))", "vector")
        raise NotExpressible(f"no PromQL for {name!r}")

    def _node(self, node: ast.AST, text: str) -> _Q:
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, bool):
                return _Q(str(v), "bool", v)
            if isinstance(v, int | float):
                return _Q(_num(float(v)), "scalar", float(v))
            return _Q(_quote(str(v)), "string", str(v))
        if isinstance(node, ast.Name):
            return self._name(node.id)
        if isinstance(node, ast.UnaryOp):
            inner = self._node(node.operand, text)
            if isinstance(node.op, ast.USub):
                if inner.kind == "scalar" and isinstance(inner.value, float):
                    return _Q(_num(-inner.value), "scalar", -inner.value)
                return _Q(f"-({self._vec(inner)})", "vector")
            if isinstance(node.op, ast.UAdd):
                return inner
            if isinstance(node.op, ast.Not):
                return _Q(
                    f"({self.universe} unless on ({self.by}) ({self._filter(inner)}))", "filter"
                )
        if isinstance(node, ast.BinOp):
            return self._binop(node, text)
        if isinstance(node, ast.Compare):
            return self._compare(node, text)
        if isinstance(node, ast.BoolOp):
            word = "and" if isinstance(node.op, ast.And) else "or"
            parts = [self._filter(self._node(v, text)) for v in node.values]
            return _Q("(" + f" {word} ".join(f"({p})" for p in parts) + ")", "filter")
        if isinstance(node, ast.IfExp):
            test = self._filter(self._node(node.test, text))
            body = self._vec(self._node(node.body, text))
            orelse = self._vec(self._node(node.orelse, text))
            return _Q(f"(({body} and on ({self.by}) {test}) or {orelse})", "vector")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            return self._call(node.func.id, [self._node(a, text) for a in node.args], text)
        raise NotExpressible(f"no PromQL for {ast.unparse(node)!r} in {text!r}")

    def _filter(self, q: _Q) -> str:
        if q.kind == "filter":
            return q.text
        if q.kind == "bool":
            return self.universe if q.value else f"({self.universe} unless {self.universe})"
        raise NotExpressible(f"{q.text} is not a condition")

    def _binop(self, node: ast.BinOp, text: str) -> _Q:
        a, b = self._node(node.left, text), self._node(node.right, text)
        ops = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Mod: "%"}
        if (
            a.kind == b.kind == "scalar"
            and isinstance(a.value, float)
            and isinstance(b.value, float)
        ):
            folded = _fold(node.op, a.value, b.value)
            if folded is not None:
                return _Q(_num(folded), "scalar", folded)
        for q in (a, b):
            if q.kind not in ("scalar", "vector"):
                raise NotExpressible(f"arithmetic on {q.text} in {text!r}")
        if isinstance(node.op, ast.FloorDiv):
            return _Q(f"floor({a.text} / {b.text})", "vector")
        op = ops.get(type(node.op))
        if op is None:
            raise NotExpressible(f"operator {type(node.op).__name__} in {text!r}")
        return _Q(f"({a.text} {op} {b.text})", "vector")

    def _compare(self, node: ast.Compare, text: str) -> _Q:
        if len(node.ops) != 1:
            raise NotExpressible(f"chained comparison in {text!r}")
        ops: dict[type[ast.cmpop], Op] = {
            ast.Gt: "above",
            ast.GtE: "at_least",
            ast.Lt: "below",
            ast.LtE: "at_most",
            ast.Eq: "equals",
            ast.NotEq: "not_equals",
        }
        op: Op = ops[type(node.ops[0])]
        left, right = node.left, node.comparators[0]
        # knob == 'auto' / knob == True: a knob test (by label when the page carries it)
        if isinstance(left, ast.Name) and left.id in KNOBS and isinstance(right, ast.Constant):
            value = right.value
            if isinstance(value, str | bool | int | float) and (
                isinstance(value, str | bool) or op in ("equals", "not_equals")
            ):
                return _Q(self.knob_test(KnobIs(left.id, op, value)), "filter")
        a, b = self._node(left, text), self._node(right, text)
        if a.kind == b.kind == "scalar":
            assert isinstance(a.value, float) and isinstance(b.value, float)
            truth = {
                "above": a.value > b.value,
                "at_least": a.value >= b.value,
                "below": a.value < b.value,
                "at_most": a.value <= b.value,
                "equals": a.value == b.value,
                "not_equals": a.value != b.value,
            }[op]
            return _Q(str(truth), "bool", truth)
        if a.kind == "scalar":
            mirror: dict[Op, Op] = {
                "above": "below",
                "below": "above",
                "at_least": "at_most",
                "at_most": "at_least",
            }
            a, b, op = b, a, mirror.get(op, op)
        for q in (a, b):
            if q.kind not in ("scalar", "vector"):
                raise NotExpressible(f"comparison of {q.text} in {text!r}")
        return _Q(f"({a.text} {PROMQL_OP[op]} {b.text})", "filter")

    def _call(self, fn: str, args: list[_Q], text: str) -> _Q:
        scalars = [a.value for a in args if a.kind == "scalar"]
        if len(scalars) == len(args) and all(isinstance(v, float) for v in scalars):
            folded = _fold_call(fn, [float(v) for v in scalars])  # type: ignore[arg-type]
            if folded is not None:
                return _Q(_num(folded), "scalar", folded)
        if fn in ("min", "max"):
            # each argument tagged apart, then min/max over the tags: an unknown (absent)
            # argument is skipped as vtop's min/max skip it, and each argument is written once
            parts = " or ".join(f'label_replace({self._vec(a)}, "vtop_arg", "{i}", "", "")'
                                for i, a in enumerate(args))  # fmt: skip
            return _Q(f"{fn} by ({self.by}) ({parts})", "vector")
        if fn == "known":
            return _Q(f"({self._vec(args[0])} or {self._vec(args[1])})", "vector")
        x = args[0]
        if x.kind != "vector":
            raise NotExpressible(f"{fn}() of {x.text} in {text!r}")
        if fn in ("ceil", "floor", "abs"):
            return _Q(f"{fn}({x.text})", "vector")
        if fn == "round":
            if len(args) > 1:
                raise NotExpressible(f"round() to digits in {text!r}")
            return _Q(f"round({x.text})", "vector")
        if fn in ("floor_to", "ceil_to"):
            step = args[1]
            base = "floor" if fn == "floor_to" else "ceil"
            return _Q(f"({base}({x.text} / {step.text}) * {step.text})", "vector")
        if fn.startswith("pow2_"):
            how = {"pow2_floor": "floor", "pow2_ceil": "ceil", "pow2_round": "round"}[fn]
            return _Q(f"(2 ^ {how}(log2(clamp_min({x.text}, 1))))", "vector")
        if fn == "clamp":
            lo, hi = args[1], args[2]
            if lo.kind == hi.kind == "scalar":
                return _Q(f"clamp({x.text}, {lo.text}, {hi.text})", "vector")
            return self._call("min", [self._call("max", [x, lo], text), hi], text)
        raise NotExpressible(f"{fn}() in {text!r}")

    # -- recommendations -----------------------------------------------------------------------

    def recommendation(self, spec: RecSpec) -> tuple[str, str | None, str | None]:
        """(the formula as vtop states it, its PromQL or None, why not)."""
        text = bounded(spec.value.text, spec.minimum, spec.maximum)
        said = f"{spec.direction} {spec.knob} to {text}"
        if spec.direction in ("enable", "disable"):
            said = f"{spec.direction} {spec.knob}"
        if spec.when is not None:
            said += f", if {spec.when.text}"
        self.lenient = True
        try:
            if spec.direction in ("enable", "disable"):
                return said, None, None
            q = self.expr(spec.value)
            if q.kind == "string":
                return said, None, None
            out = self._vec(q)
            if spec.minimum is not None:
                out = self._call("max", [_Q(out, "vector"), self.expr(spec.minimum)], text).text
            if spec.maximum is not None:
                out = self._call("min", [_Q(out, "vector"), self.expr(spec.maximum)], text).text
            if spec.rounding == "int":
                out = f"round({out})"
            if spec.when is not None:
                out = f"({out} and on ({self.by}) {self._filter(self.expr(spec.when))})"
            return said, out, None
        except NotExpressible as exc:
            return said, None, str(exc)
        finally:
            self.lenient = False


def negate(c: Cond) -> Cond:
    """`not c`, pushed down to the comparisons (three-valued: unknown stays unknown)."""
    if isinstance(c, Compare):
        if c.clear is not None:
            raise NotExpressible("not over a comparison with a recovery threshold")
        return Compare(c.measure, NEGATE[c.op], c.threshold, None, c.line)
    if isinstance(c, KnobIs):
        return KnobIs(c.knob, NEGATE[c.op], c.value)
    if isinstance(c, All):
        return AnyOf(tuple(negate(i) for i in c.items))
    if isinstance(c, AnyOf):
        return All(tuple(negate(i) for i in c.items))
    if isinstance(c, Not):
        return c.item
    if isinstance(c, Sample):
        return Sample(c.operand, NEGATE[c.op], c.threshold)
    raise NotExpressible(f"not over {type(c).__name__}")


def measures(c: Cond) -> list[Measure]:
    """The measures a condition compares (for `if_known`: absent measure = unknown)."""
    if isinstance(c, Compare):
        return [c.measure]
    if isinstance(c, All | AnyOf):
        return [m for i in c.items for m in measures(i)]
    if isinstance(c, Not | IfKnown):
        return measures(c.item)
    return []


def has_clear(c: Cond) -> bool:
    if isinstance(c, Compare):
        return c.clear is not None
    if isinstance(c, All | AnyOf):
        return any(has_clear(i) for i in c.items)
    if isinstance(c, Not | IfKnown):
        return has_clear(c.item)
    return False


def _fold(op: ast.operator, a: float, b: float) -> float | None:
    try:
        if isinstance(op, ast.Add):
            return a + b
        if isinstance(op, ast.Sub):
            return a - b
        if isinstance(op, ast.Mult):
            return a * b
        if isinstance(op, ast.Div):
            return a / b
        if isinstance(op, ast.FloorDiv):
            return float(a // b)
        if isinstance(op, ast.Mod):
            return a % b
    except ZeroDivisionError:
        return None
    return None


def _fold_call(fn: str, args: list[float]) -> float | None:
    from vtop.triage.expr import FUNCTIONS

    try:
        out = FUNCTIONS[fn](*args)
    except (TypeError, ValueError, ZeroDivisionError, KeyError):
        return None
    return float(out) if isinstance(out, int | float) and not isinstance(out, bool) else None


# -- whole rules -------------------------------------------------------------------------------


def _severity(s: Severity) -> str:
    return s.name.lower()


def export(rules: Iterable[Rule], options: Options | None = None) -> Exported:
    """Every rule that PromQL can express as alerting rules; the others with the reason."""
    o = options or Options()
    out = Exported(group=o.group, interval=o.interval)
    ordered = sorted(rules, key=lambda r: (r.order, r.id))
    for rule in ordered:
        try:
            out.alerts.extend(_rule(rule, o))
        except NotExpressible as exc:
            out.skipped.append((rule.id, str(exc)))
    exported = {a["labels"]["vtop_rule"] for a in out.alerts}
    for rule in ordered:
        targets = [r for r in rule.explains if r in exported]
        if rule.id in exported and targets:
            out.inhibits.append(
                {
                    "source_matchers": [f'vtop_rule="{rule.id}"'],
                    "target_matchers": [f'vtop_rule=~"{"|".join(targets)}"'],
                    "equal": list(o.by),
                }
            )
        if rule.id in exported and rule.escalate:
            out.inhibits.append(
                {
                    "source_matchers": [f'vtop_rule="{rule.id}"', 'severity="critical"'],
                    "target_matchers": [
                        f'vtop_rule="{rule.id}"',
                        f'severity="{_severity(rule.severity)}"',
                    ],
                    "equal": list(o.by),
                }
            )
    return out


def _rule(rule: Rule, o: Options) -> list[dict[str, Any]]:
    tr = _Translator(rule, o)
    name = alert_name(rule.id)
    sev = _severity(rule.severity)
    expr = tr.cond(rule.when, active=False)
    if has_clear(rule.when):
        state = (
            f"ALERTS{{alertname={_quote(name)}, vtop_rule={_quote(rule.id)}, "
            f"severity={_quote(sev)}}}"
        )
        expr = f"{expr}\nor\n(\n{tr.cond(rule.when, active=True)}\nand on ({tr.by}) {state}\n)"
    fast = _decisive(rule, tr)
    annotations = _annotations(rule, tr)
    base: dict[str, Any] = {"alert": name, "expr": expr}
    if rule.for_s:
        base["for"] = durations.exact(rule.for_s)
    if rule.keep_firing_for_s:
        base["keep_firing_for"] = durations.exact(rule.keep_firing_for_s)
    base["labels"] = {"severity": sev, "vtop_rule": rule.id}
    base["annotations"] = annotations
    alerts = [base]
    for esc in rule.escalate:
        esc_expr = f"(\n{expr}\n)\nand\n({tr.cond(esc.when, active=False)})"
        alert = dict(base, expr=esc_expr)
        alert["labels"] = {"severity": _severity(esc.severity), "vtop_rule": rule.id}
        alerts.append(alert)
    if fast is not None:
        alert = {"alert": name, "expr": fast}
        if rule.keep_firing_for_s:
            alert["keep_firing_for"] = durations.exact(rule.keep_firing_for_s)
        alert["labels"] = {"severity": sev, "vtop_rule": rule.id, "vtop_path": "decisive"}
        alert["annotations"] = annotations
        alerts.append(alert)
    return alerts


def _decisive(rule: Rule, tr: _Translator) -> str | None:
    """The fast path as an alert of its own (same name, `vtop_path: decisive`, no `for`: its
    windows say how long): where the decisive condition and the rule's own hold, over at least
    `MIN_DECISIVE_POLLS` scrapes of the evidence span. None where PromQL cannot say it."""
    if rule.decisive is None:
        return None
    try:
        fast = tr.cond(rule.decisive.when, active=False)
        main = tr.cond(rule.when, active=False)
    except NotExpressible as exc:
        tr.partial.setdefault(f"the fast path: {exc}", None)
        return None
    span = tr._range(rule.decisive.evidence_s)
    samples = f"max by ({tr.by}) (count_over_time(up{span})) >= {MIN_DECISIVE_POLLS}"
    return f"(\n{fast}\n)\nand on ({tr.by})\n(\n{main}\n)\nand on ({tr.by})\n({samples})"


def _annotations(rule: Rule, tr: _Translator) -> dict[str, str]:
    ann = {
        "summary": "{{ $labels.instance }}: " + rule.title,
        "description": " ".join(rule.description.split()),
        "vtop_summary": " ".join(rule.summary.split()),
    }
    for i, spec in enumerate(rule.recommend, 1):
        said, promql, why = tr.recommendation(spec)
        key = f"recommend_{i}_{spec.knob}"
        ann[key] = said
        if promql is not None:
            ann[key + "_promql"] = promql
        elif why is not None:
            ann[key + "_promql"] = f"(computed by vtop only: {why})"
    if tr.knobs_used:
        ann["vtop_knobs"] = "; ".join(tr.knobs_used[k] for k in sorted(tr.knobs_used))
    req = rule.requires
    ann["vtop_requires"] = (
        f"vtop waits for {durations.exact(req.evidence_s)} of evidence"
        + (f" and {req.finished} finished requests" if req.finished else "")
        + " before this rule may fire; here Prometheus's own history and `for` stand in"
    )
    if rule.decisive is not None:
        ann["vtop_decisive"] = (
            f"fast path: a second alert of this name (vtop_path=decisive) fires on decisive "
            f"evidence across {durations.exact(rule.decisive.evidence_s)}, as vtop does"
        )
    if tr.partial:
        ann["vtop_partial"] = "vtop also fires where PromQL cannot look: " + "; ".join(tr.partial)
    if rule.explains:
        ann["vtop_explains"] = (
            "root cause of "
            + ", ".join(rule.explains)
            + " (Alertmanager inhibit rules: vtop rules export "
            "--format alertmanager)"
        )
    if rule.source:
        ann["source"] = " ".join(rule.source.split())
    return ann


# -- output ------------------------------------------------------------------------------------


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, text: str) -> yaml.Node:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Dumper.add_representer(str, _str)


def rule_file(exp: Exported, *, origin: str = "") -> str:
    """The Prometheus rule file: a header comment (what was left out, and why), one group."""
    head = [
        f"# Prometheus alerting rules exported from vtop {__version__}'s rules"
        f"{' (' + origin + ')' if origin else ''}.",
        "# Regenerate with `vtop rules export --format prometheus`; needs Prometheus 2.42+",
        "# (keep_firing_for). Knobs no metric exposes are label-joined vectors: see each",
        "# alert's vtop_knobs annotation. Gauge windows are subqueries sampled at the rule",
        "# group's evaluation interval unless exported with --resolution (your scrape",
        "# interval, e.g. 15s, reads them as vtop does).",
    ]
    if exp.skipped:
        head.append("# Not exported (no PromQL equivalent):")
        head.extend(f"#   {rid}: {why}" for rid, why in exp.skipped)
    group: dict[str, Any] = {"name": exp.group}
    if exp.interval:
        group["interval"] = exp.interval
    group["rules"] = exp.alerts
    body = yaml.dump(
        {"groups": [group]}, Dumper=_Dumper, sort_keys=False, width=100, allow_unicode=True
    )
    return "\n".join(head) + "\n" + body


def inhibit_file(exp: Exported) -> str:
    """Alertmanager `inhibit_rules`: a root cause silences what it explains, and critical
    silences warning of the same rule (vtop's `explains` and escalation)."""
    head = (
        "# Alertmanager inhibit rules exported from vtop: merge into alertmanager.yml.\n"
        "# A firing root cause (vtop's `explains`) silences the alerts it explains on the same\n"
        "# instance; a rule's critical alert silences its warning one.\n"
    )
    return head + yaml.dump(
        {"inhibit_rules": exp.inhibits}, Dumper=_Dumper, sort_keys=False, width=100
    )


# -- the command line -------------------------------------------------------------------------


def _knob_value(text: str) -> KnobValue:
    from vtop.sources.discovery import _typed

    return _typed(text)


def build_parser() -> OneLineParser:
    """`vtop rules export`'s arguments (also listed by `vtop rules --help` and completed by
    `vtop completion`)."""
    from pathlib import Path

    p = OneLineParser(
        prog="vtop rules export",
        description="Write vtop's rules as Prometheus alerting rules (or Alertmanager inhibit "
        "rules for their root causes).",
    )
    p.add_argument(
        "--format",
        choices=("prometheus", "alertmanager"),
        default="prometheus",
        help="prometheus: alerting rules (default); alertmanager: inhibit rules for root causes",
    )
    p.add_argument("-o", "--output", type=Path, metavar="FILE", help="write here, not stdout")
    p.add_argument(
        "--rules",
        action="append",
        default=[],
        type=Path,
        metavar="DIR",
        help="extra rule directory (repeatable), as for the monitor",
    )
    p.add_argument("--no-user", action="store_true", help="ignore $XDG_CONFIG_HOME/vtop/rules")
    p.add_argument(
        "--knob",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a knob no metric exposes, for every instance (repeatable)",
    )
    p.add_argument(
        "--targets",
        action="append",
        default=[],
        metavar="FILE",
        help="per-instance knobs from a targets file's labels (max_num_seqs=128)",
    )
    p.add_argument(
        "--by",
        default="job,instance",
        metavar="LABELS",
        help="labels an alert is per (default job,instance; must include instance)",
    )
    p.add_argument(
        "--resolution",
        default="",
        metavar="DURATION",
        help="subquery resolution, e.g. 15s (default: the evaluation interval)",
    )
    p.add_argument(
        "--interval",
        default=None,
        metavar="DURATION",
        help="the rule group's evaluation interval (default: Prometheus's global)",
    )
    return p


def main(argv: Sequence[str]) -> int:
    """`vtop rules export --format prometheus|alertmanager [-o FILE] …`; returns the exit code."""
    import sys

    from vtop.targets import TargetsError, load_targets
    from vtop.triage.loader import load_catalog

    args = build_parser().parse_args(list(argv))

    def fail(message: str) -> int:
        print(f"vtop rules export: {message}", file=sys.stderr)
        return 2

    knobs: dict[str, KnobValue] = {}
    for item in args.knob:
        name, sep, value = item.partition("=")
        if not sep or name not in KNOBS:
            return fail(
                f"--knob {item!r}: expected NAME=VALUE with a knob name "
                f"({', '.join(sorted(KNOBS))})"
            )
        knobs[name] = _knob_value(value)
    per: dict[str, dict[str, KnobValue]] = {}
    try:
        for path in args.targets:
            for t in load_targets(path):
                values = {k: v.value for k, v in t.knobs().items()}
                if values:
                    per.setdefault(t.instance, {}).update(values)
    except TargetsError as exc:
        return fail(str(exc))
    by = tuple(b.strip() for b in args.by.split(",") if b.strip())
    if "instance" not in by:
        return fail("--by must include instance (knobs are joined on it)")
    for what, value in (("--resolution", args.resolution), ("--interval", args.interval)):
        if value and not durations.is_promql(value):
            return fail(f"{what} {value!r} is not a duration like 15s or 1m")
    loaded = load_catalog(args.rules, user=not args.no_user)
    for err in loaded.errors:
        print(f"vtop rules export: rule skipped: {err}", file=sys.stderr)
    options = Options(
        by=by,
        resolution=args.resolution,
        interval=args.interval,
        knobs=knobs,
        instance_knobs=per,
        knob_sources={k: ", ".join(args.targets) for v in per.values() for k in v},
    )
    exp = export(loaded.rules.values(), options)
    for rid, why in exp.skipped:
        print(f"vtop rules export: not exported: {rid}: {why}", file=sys.stderr)
    text = rule_file(exp) if args.format == "prometheus" else inhibit_file(exp)
    if args.output is None:
        sys.stdout.write(text)
    else:
        try:
            args.output.write_text(text)
        except OSError as exc:
            return fail(f"cannot write {args.output}: {exc.strerror or exc}")
        alerts = len(exp.alerts) if args.format == "prometheus" else len(exp.inhibits)
        what = "alerting rules" if args.format == "prometheus" else "inhibit rules"
        print(f"vtop rules export: {alerts} {what} written to {args.output}", file=sys.stderr)
    return 1 if loaded.errors else 0
