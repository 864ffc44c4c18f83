"""Measures as PromQL: every canonical signal, window and knob a rule's measure reads.

A measure is one PromQL function over one signal (`vtop.triage.schema`), so this is where the
export meets the catalog: each canonical signal becomes an aggregate per instance (`sum by
(job, instance)`, `max` for KV usage) with its aliases across vLLM versions joined by `or`
(the first alias wins, as in `PageReader`); counters are rated before they are summed,
histograms summed by `le` before `histogram_quantile`, and a gauge function over an aggregate
is a subquery (`avg_over_time((…)[2m:])`), which reads the history Prometheus already has and
needs no recording rules. Derived signals use the PromQL their table in `triage.derived`
states, and knobs no metric exposes become label-joined vectors (the package docstring says in
which order their values are looked for).

The translator is one class built in layers, one module each (measures here, then
`formulas`, then `conditions`), because a rule's parts refer to each other both ways: a value
is a measure, a threshold a formula, and a `share_over_time` measure holds a condition. The
layer below names what it needs from above as an abstract method (`sample`).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence

from vtop import durations, knobs
from vtop.knobs import KnobValue
from vtop.signals.catalog import BY_NAME, Signal
from vtop.sources.discovery import defaults as version_defaults
from vtop.sources.promql import quote
from vtop.triage.counts import SINCE_START_LOAD_FLOOR, SINCE_START_MIN_S
from vtop.triage.promql.terms import PROMQL_OP, NotExpressible, Options, literal
from vtop.triage.schema import Cond, KnobIs, Measure, Operand, Rule, ValueDef

CACHE_CONFIG_LABELS = {
    name: spec.page_label or name
    for name, spec in knobs.read_at("page").items()
    if name != "kv_capacity_tokens"  # a label from 0.25 only; blocks × block size before
}
"""Knobs `vllm:cache_config_info` carries as labels (values as Python `str()`), by their label."""
MEASURED_BY_PROMETHEUS = {"up": "up", "scrape_latency": "scrape_duration_seconds"}
"""vtop's own per-scrape signals and what Prometheus records of each scrape."""
UNAVAILABLE = {
    "gpu_mem_total": "only vtop's NVML reader measures GPU memory in all",
    "gpu_power_limit": "only vtop's NVML reader reads the power limit",
    "scrape_bytes": "Prometheus records scrape sizes only with the extra-scrape-metrics "
    "feature flag",
    "host_cpu": "only vtop reads the CPU of the host it shares with the server",
}


def label_value(value: KnobValue) -> str:
    """A knob value as `vllm:cache_config_info` writes it (Python `str()`)."""
    return str(value)


class MeasureTranslator(abc.ABC):
    """PromQL for one rule's measures and knobs; `formulas.FormulaTranslator` adds formulas and
    `conditions.Translator` conditions (it also gives `sample`, which share_over_time needs)."""

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

    def range_selector(self, window_s: float) -> str:
        """A range selector over `window_s` (`[5m]`)."""
        return f"[{durations.exact(window_s)}]"

    def _sub(self, window_s: float) -> str:
        return f"[{durations.exact(window_s)}:{self.o.resolution}]"

    # -- signals -----------------------------------------------------------------------------

    def _signal(self, name: str) -> Signal:
        if name in UNAVAILABLE:
            raise NotExpressible(f"uses {name}: {UNAVAILABLE[name]}")
        sig = BY_NAME[name]
        if not sig.aliases:  # measured by vtop alone; UNAVAILABLE should say why
            raise NotExpressible(f"uses {name}: no server or exporter publishes it")
        return sig

    def _matchers(self, sig: Signal, label: str) -> str:
        if label and label != "*" and sig.label is not None:
            return "{" + f"{sig.label}={quote(label)}" + "}"
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
            return (
                f"((({running} + {waiting}) == bool 0) * (({' + '.join(gauges)}) == bool 0) "
                f"* ({tokens} > bool 0))"
            )
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
            parts.append(
                f"max by ({self.by}) (({body}) and on (model_name) "
                f"(count by (model_name) ({per}) > 1))"
            )
        return self._alternatives(parts)

    def gauge_delta(self, operand: Operand, window_s: float) -> str:
        """The change of a gauge between its last two samples (summed over engines)."""
        sig = self._signal(operand.name)
        m, w = self._matchers(sig, operand.label), self.range_selector(window_s)
        return self._alternatives([f"sum by ({self.by}) (idelta({a}{m}{w}))" for a in sig.aliases])

    def _over(self, fn: str, series: str, window_s: float | None) -> str:
        """`fn(series[W])`; over everything since the server started (`window_s` None): the
        cumulative series itself, per second of uptime for a rate."""
        if window_s is not None:
            return f"{fn}({series}{self.range_selector(window_s)})"
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
        floor = literal(SINCE_START_LOAD_FLOOR)
        return (
            f"(({self.uptime()} >= {literal(SINCE_START_MIN_S)}) and on ({self.by}) "
            f"({now} >= {floor} * {average}))"
        )

    def counter(self, fn: str, operand: Operand, window_s: float | None) -> str:
        sig = self._signal(operand.name)
        m = self._matchers(sig, operand.label)
        return self._alternatives(
            [
                f"sum by ({self.by}) ({self._over(fn, f'{a}_total{m}', window_s)})"
                for a in sig.aliases
            ]
        )

    def hist_quantile(self, q: float, name: str, window_s: float | None) -> str:
        sig = self._signal(name)
        parts = []
        for a in sig.aliases:
            buckets = (
                f"{a}_bucket" if window_s is None else self._over("rate", f"{a}_bucket", window_s)
            )
            parts.append(f"histogram_quantile({literal(q)}, sum by ({self.by}, le) ({buckets}))")
        return self._alternatives(parts)

    def hist_part(self, part: str, name: str, window_s: float | None, fn: str = "rate") -> str:
        sig = self._signal(name)
        return self._alternatives(
            [f"sum by ({self.by}) ({self._over(fn, f'{a}_{part}', window_s)})" for a in sig.aliases]
        )

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
            means = [
                self.ratio(
                    self.hist_part("sum", h, w, "increase"),
                    self.hist_part("count", h, w, "increase"),
                )
                for h in (part, "ttft")
            ]
            return f"clamp_max({self.ratio(*means)}, 1)"
        if name == "iteration_fill":
            mean = self.ratio(
                self.hist_part("sum", "iteration_tokens", w, "increase"),
                self.hist_part("count", "iteration_tokens", w, "increase"),
            )
            return f"clamp_max({mean} / {self.knob('max_num_batched_tokens')}, 1)"
        if name == "engine_steps_per_s":
            return self.hist_part("count", "iteration_tokens", w)
        if name == "engine_busy":
            steps = self.hist_part("count", "iteration_tokens", w)
            itl = self.ratio(self.hist_part("sum", "itl", w), self.hist_part("count", "itl", w))
            return f"clamp_max({steps} * {itl}, 1)"
        if name == "decode_concurrency":
            tokens = self.counter("rate", Operand("generation_tokens"), w)
            itl = self.ratio(self.hist_part("sum", "itl", w), self.hist_part("count", "itl", w))
            return f"({tokens} * {itl})"
        if w is None:
            raise NotExpressible(f"{name} has no meaning since the server started")
        if name == "queue_seen":
            waiting = f"avg_over_time(({self.instant(Operand('waiting'))}){self._sub(w)})"
            return self.ratio(waiting, self.hist_part("sum", "queue_time", w))
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
                    f"(rate({a}_bucket{self.range_selector(w)})))"
                )
                spread = self.ratio(f"max by ({self.by}) ({h})", f"min by ({self.by}) ({h})")
                parts.append(f"({spread} and (count by ({self.by}) ({h}) > 1))")
            return self._alternatives(parts)
        if name == "preemptions_per_request":
            finished = self.counter("increase", Operand("requests_finished"), w)
            return (
                f"({self.counter('increase', Operand('preemptions'), w)} / "
                f"clamp_min({finished}, 1))"
            )
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
        if w is None and fn not in (
            "value",
            "rate",
            "increase",
            "histogram_quantile",
            "histogram_mean",
        ):
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
            return f"quantile_over_time({literal(q)}, ({x}){self._sub(w)})"
        return f"{fn}(({x}){self._sub(w)})"

    @abc.abstractmethod
    def sample(self, c: Cond) -> str:
        """A per-evaluation 0/1 vector for a share_over_time sub-condition (`conditions`)."""

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
                f'label_replace(vector({literal(float(v))}), "instance", {quote(i)}, "", "")'
                for i, v in sorted(per.items())
            )
            parts.append(f"({u} * on (instance) group_left () ({consts}))")
        if default is not None:
            assert isinstance(default, int | float)
            parts.append(f"({u} * {literal(float(default))})")
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
                f"{{{label}{m}{quote(label_value(value))}}})"
            )
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise NotExpressible(f"knob test {name} {op} {value!r} has no numeric PromQL form")
        return f"({self.knob(name)} {PROMQL_OP[op]} {literal(float(value))})"
