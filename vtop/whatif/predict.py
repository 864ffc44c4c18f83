"""The twin run on the observed workload: a self-check at today's knobs, then the change.

A prediction is only worth showing if the twin reproduces today. So `prepare` builds the twin
from what the server exposes (its knobs, the workload `workload.estimate` reads, the step law
`fit.fit` finds), runs it at today's knobs and compares its figures with the observed ones;
`WhatIf.predict` then runs it with changed knobs on the same workload and seed.

- Both sides are read the same way: the twin's /metrics pages go through vtop's own parser
  into a `Store`, and `figures` computes every figure from a store, observed or simulated.
- The error of a figure is |twin - observed| / max(|observed|, its floor) (the floors keep
  "0.1 vs 0.3 requests waiting" from reading as a 200 % miss). Above `MAX_TOKENS_ERROR` on
  generated tokens/s the twin does not describe this server and every prediction is withheld
  with that reason; no observed token rate withholds as well. Below it, the confidence is the
  worst of what each family allows: tokens/s "high" (<= 10 %), "medium" (<= 20 %) or "low";
  occupancy and latency "high" within half their limit, "medium" within it, "low" past it
  (their figures then withheld). One confident figure beside a twin that misses the queue
  14x is no high confidence.
- A twin can get the token rate right and the rest wrong (a queue of 243 ms against 20 s
  observed: a different load, the same throughput), so each family of `FAMILIES` is judged on
  its own and a family that is off has its figures withheld with its reason, while the others
  are still predicted. Throughput (generated tokens/s) is the gate above. Occupancy (running,
  waiting, KV usage; preemptions/s follow it) is off above `MAX_OCCUPANCY_ERROR` relative
  error on any of them. Latency (queue p50, TTFT p50/p90, ITL p50; queue p90 follows) spans
  orders of magnitude, so it is judged as a ratio: the larger of twin and observed over the
  smaller (each at least its floor); above `MAX_LATENCY_FACTOR` on any of them it is off. A
  family the server shows none of is not judged (its bands widen instead, below).
- A predicted figure carries a band: the after value times 1 +- that figure's self-check error
  (at least `BAND_FLOOR`; a figure the server did not show gets the token error doubled),
  widened by `UNKNOWN_WIDEN` for each of the inputs a change leans on that had to be assumed
  (`UNKNOWNS`: the length distributions, the batch cap, the KV pool): today's self-check can
  pass on an assumption that the changed configuration exposes. The band is never narrower
  than the figure's floor either side (a predicted 0 preemptions/s reads 0-0.1, not 0-0).
- Cost: the twin runs `WARMUP_S` virtual seconds to fill its batch, then `SPAN_S` measured
  seconds read every `PAGE_EVERY_S`: five minutes of workload. Pages are what costs (rendering
  and parsing one is ~25 ms); counters and histogram increases only need the two ends, and 25
  gauge samples give their means. `bench/whatif.py` prints the time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Final, Literal

from vtop import fmt
from vtop.figures import ENDPOINT, Scope, within_wholes
from vtop.knobs import KNOBS, KnobValue, twin_knobs
from vtop.model import Knob
from vtop.signals import histogram as hist
from vtop.signals.extract import PageReader
from vtop.signals.store import Store
from vtop.sim.calibration import StepPoint
from vtop.sim.hardware import Preset
from vtop.sim.serve_args import ServeArgs
from vtop.sim.twin import Twin
from vtop.sim.workload import Workload
from vtop.whatif.fit import StepFit, fit, prior_preset, step_points
from vtop.whatif.workload import WorkloadEstimate, estimate, steady_window

WARMUP_S = 30.0
SPAN_S = 120.0
PAGE_EVERY_S = 10.0
"""Virtual seconds the twin runs before it is read, how long it is read, and how often."""

MAX_TOKENS_ERROR = 0.30
"""Above this self-check error on generated tokens/s, predictions are withheld."""
MAX_OCCUPANCY_ERROR = 0.50
"""Above this relative error on running, waiting or KV usage, occupancy is withheld."""
MAX_LATENCY_FACTOR = 2.0
"""Above this ratio (twin/observed or its inverse) on a latency figure, latency is withheld."""
BAND_FLOOR = 0.10
"""The narrowest band a prediction carries: the real server's own run-to-run spread (the same
configuration and load measured 392 and 439 tokens/s in two runs of bench/whatif_real.py)."""
UNKNOWN_WIDEN = 0.10
UNKNOWNS = ("prompt lengths", "generation lengths", "max_num_seqs", "KV pool")
"""Assumed inputs (by the start of their `assumed` line) that widen every band."""

Confidence = Literal["high", "medium", "low", "withheld"]

FIGURES = (
    "generation_tokens_per_s",
    "running",
    "waiting",
    "kv_usage",
    "preemptions_per_s",
    "queue_p50",
    "queue_p90",
    "ttft_p50",
    "ttft_p90",
    "itl_p50",
)
"""What the self-check compares and a prediction states, by the name the report will use."""

FLOORS: dict[str, float] = {
    "generation_tokens_per_s": 1.0,
    "running": 1.0,
    "waiting": 1.0,
    "kv_usage": 0.05,
    "preemptions_per_s": 0.1,
    "queue_p50": 0.05,
    "queue_p90": 0.05,
    "ttft_p50": 0.05,
    "ttft_p90": 0.05,
    "itl_p50": 0.002,
}


@dataclass(frozen=True, slots=True)
class Family:
    """Figures the self-check judges together: `judged` decide, `follows` share the verdict."""

    name: str
    judged: tuple[str, ...]
    follows: tuple[str, ...] = ()
    ratio: bool = False
    """Judged as a factor (latencies span orders of magnitude), not a relative error."""

    @property
    def members(self) -> tuple[str, ...]:
        return (*self.judged, *self.follows)


FAMILIES = (
    Family("throughput", ("generation_tokens_per_s",)),
    Family("occupancy", ("running", "waiting", "kv_usage"), ("preemptions_per_s",)),
    Family("latency", ("queue_p50", "ttft_p50", "ttft_p90", "itl_p50"), ("queue_p90",), True),
)
"""Every figure of `FIGURES` in exactly one family."""

LABELS = {
    "generation_tokens_per_s": "gen tok/s",
    "running": "running",
    "waiting": "waiting",
    "kv_usage": "KV usage",
    "preemptions_per_s": "preemptions/s",
    "queue_p50": "queue p50",
    "queue_p90": "queue p90",
    "ttft_p50": "TTFT p50",
    "ttft_p90": "TTFT p90",
    "itl_p50": "ITL p50",
}
"""How a reason names a figure."""

KNOB_FIELDS: Final[dict[str, type]] = {name: KNOBS[name].kind for name in twin_knobs()}
"""The knobs a what-if can set (ServeArgs fields) and their types, as `vtop.knobs` says."""


def figures(
    store: Store, window_s: float | None, scope: Scope = ENDPOINT
) -> dict[str, float | None]:
    """Every figure of `FIGURES` over the window; None where the server shows nothing."""
    queue = store.hist_delta(scope.key("queue_time"), window_s)
    ttft = store.hist_delta(scope.key("ttft"), window_s)
    itl = store.hist_delta(scope.key("itl"), window_s)
    ttft_p50, ttft_p90 = hist.quantile(0.5, ttft), hist.quantile(0.9, ttft)
    queue_p50 = within_wholes({"queue_time": hist.quantile(0.5, queue), "ttft": ttft_p50})
    queue_p90 = within_wholes({"queue_time": hist.quantile(0.9, queue), "ttft": ttft_p90})
    return {
        "generation_tokens_per_s": store.per_second(scope.key("generation_tokens"), window_s),
        "running": store.avg(scope.key("running"), window_s),
        "waiting": store.avg(scope.key("waiting"), window_s),
        "kv_usage": store.avg(scope.key("kv_usage"), window_s),
        "preemptions_per_s": store.per_second(scope.key("preemptions"), window_s),
        "queue_p50": queue_p50["queue_time"],
        "queue_p90": queue_p90["queue_time"],
        "ttft_p50": ttft_p50,
        "ttft_p90": ttft_p90,
        "itl_p50": hist.quantile(0.5, itl),
    }


def relative_error(name: str, twin: float | None, observed: float | None) -> float | None:
    """|twin - observed| relative to the observed (at least the figure's floor)."""
    if twin is None or observed is None:
        return None
    return abs(twin - observed) / max(abs(observed), FLOORS[name])


def latency_factor(name: str, twin: float | None, observed: float | None) -> float | None:
    """How many times off the twin is: the larger over the smaller, each at least the floor."""
    if twin is None or observed is None:
        return None
    floor = FLOORS[name]
    a, b = max(twin, floor), max(observed, floor)
    return max(a, b) / min(a, b)


def serve_args(knobs: Mapping[str, Knob]) -> tuple[ServeArgs, list[str], list[str]]:
    """The twin's knobs from the discovered ones; (args, read, assumed)."""
    values: dict[str, KnobValue] = {}
    read: list[str] = []
    assumed: list[str] = []
    for name, kind in KNOB_FIELDS.items():
        knob = knobs.get(name)
        if knob is None or knob.value is None:
            assumed.append(f"{name}: unknown, the preset's default")
            continue
        values[name] = kind(knob.value)
        (assumed if knob.assumed else read).append(f"{name}={knob.value} ({knob.detail})")
    blocks = knobs.get("num_gpu_blocks")
    if blocks is not None and isinstance(blocks.value, int | float) and blocks.value > 0:
        values["num_gpu_blocks_override"] = int(blocks.value)
        read.append(f"num_gpu_blocks={blocks.value} ({blocks.detail})")
    else:
        assumed.append("KV pool: sized by the preset's memory arithmetic")
    return ServeArgs(**values), read, assumed  # type: ignore[arg-type]


def changed(args: ServeArgs, preset: Preset, changes: Mapping[str, KnobValue]) -> ServeArgs:
    """`args` with `changes` applied; a KV pool read from the server is resized for a new
    kv_cache_dtype or gpu_memory_utilization as vLLM would size it."""
    for name in changes:
        if name not in KNOB_FIELDS:
            raise ValueError(f"unknown knob {name!r}; a what-if can set {', '.join(KNOB_FIELDS)}")
    typed = {name: KNOB_FIELDS[name](value) for name, value in changes.items()}
    for name, value in typed.items():
        zero_ok = name == "long_prefill_token_threshold"  # 0: no threshold
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if number and (value < 0 or (value == 0 and not zero_ok)):
            raise ValueError(f"{name}={value}: the twin needs {'>= 0' if zero_ok else '> 0'}")
    new = replace(args, **typed)
    blocks = args.num_gpu_blocks_override
    if blocks is not None:
        old_bytes = 1 if args.kv_cache_dtype.startswith("fp8") else 2
        new_bytes = 1 if new.kv_cache_dtype.startswith("fp8") else 2
        tokens = blocks * args.block_size * old_bytes / new_bytes
        if preset.gpu is not None and new.gpu_memory_utilization != args.gpu_memory_utilization:
            extra = (
                new.gpu_memory_utilization - args.gpu_memory_utilization
            ) * preset.gpu.memory_bytes
            per_token = preset.model.kv_bytes_per_token(new_bytes)
            tokens += extra * preset.tensor_parallel_size / per_token
        new = replace(new, num_gpu_blocks_override=max(1, int(tokens // new.block_size)))
    return new


def run_twin(
    preset: Preset,
    args: ServeArgs,
    workload: Workload,
    *,
    seed: int = 0,
    warmup_s: float = WARMUP_S,
    span_s: float = SPAN_S,
    page_every_s: float = PAGE_EVERY_S,
) -> dict[str, float | None]:
    """The twin's figures on `workload` at `args`, read through vtop's parser and store."""
    twin = Twin.of(preset, args, workload, seed=seed)
    reader = PageReader()
    store = Store("whatif", capacity=int(span_s / page_every_s) + 8)
    twin.advance(warmup_s)
    pages = round(span_s / page_every_s)
    for i in range(pages + 1):
        if i:
            twin.advance(page_every_s)
        page = twin.metrics_text(process_metrics=False).decode()
        store.ingest(reader.read(page, endpoint="whatif", t=twin.now, latency_s=0.0))
    return figures(store, None)


@dataclass(frozen=True, slots=True)
class Band:
    """A predicted figure: today's (the twin's), after the change, and the band around it."""

    now: float
    after: float
    low: float
    high: float


@dataclass(frozen=True, slots=True)
class FamilyCheck:
    """One family's verdict: its worst judged figure, how far off, and why withheld if so."""

    family: str
    worst: str | None
    """The judged figure furthest off; None when the server shows none of them."""
    error: float | None
    """Its relative error, or its factor for a family judged as a ratio."""
    reason: str = ""
    """Why the family's figures are withheld (empty when they are predicted)."""

    @property
    def withheld(self) -> bool:
        return bool(self.reason)


@dataclass(frozen=True, slots=True)
class SelfCheck:
    """The twin at today's knobs against the observed server."""

    observed: dict[str, float | None]
    twin: dict[str, float | None]
    errors: dict[str, float | None]
    confidence: Confidence
    reason: str
    """Why withheld (empty otherwise)."""
    families: dict[str, FamilyCheck] = field(default_factory=dict)

    @property
    def withheld(self) -> bool:
        return self.confidence == "withheld"

    def withheld_figures(self) -> dict[str, str]:
        """Figure -> why it is not predicted: every figure when the whole check fails, else
        the members of the families that are off."""
        if self.withheld:
            return dict.fromkeys(FIGURES, self.reason)
        return {
            name: verdict.reason
            for family in FAMILIES
            if (verdict := self.families.get(family.name)) is not None and verdict.withheld
            for name in family.members
        }


def judge(
    family: Family, observed: Mapping[str, float | None], twin: Mapping[str, float | None]
) -> FamilyCheck:
    """The family's worst judged figure and, past its limit, why its figures are withheld."""
    measure = latency_factor if family.ratio else relative_error
    scored = [
        (error, name)
        for name in family.judged
        if (error := measure(name, twin.get(name), observed.get(name))) is not None
    ]
    if not scored:
        return FamilyCheck(family.name, None, None)
    error, worst = max(scored)
    seen, got = observed.get(worst), twin.get(worst)
    label = LABELS[worst]
    reason = ""
    if family.ratio and error > MAX_LATENCY_FACTOR:
        reason = (
            f"the twin's {label} is {error:.3g}x off today's ({fmt.seconds(got)} against "
            f"{fmt.seconds(seen)} observed; more than {MAX_LATENCY_FACTOR:g}x): "
            f"its {family.name} does not describe this server"
        )
    elif not family.ratio and family.name != "throughput" and error > MAX_OCCUPANCY_ERROR:
        reason = (
            f"the twin's {label} misses today's by {error:.0%} ({fmt.num(got)} against "
            f"{fmt.num(seen)} observed; more than {MAX_OCCUPANCY_ERROR:.0%}): "
            f"its {family.name} does not describe this server"
        )
    return FamilyCheck(family.name, worst, error, reason)


def check(observed: Mapping[str, float | None], twin: Mapping[str, float | None]) -> SelfCheck:
    """The errors, the confidence they give and, above `MAX_TOKENS_ERROR`, why withheld; each
    family's verdict beside them."""
    errors = {n: relative_error(n, twin.get(n), observed.get(n)) for n in FIGURES}
    families = {f.name: judge(f, observed, twin) for f in FAMILIES}
    tokens = errors["generation_tokens_per_s"]
    seen = observed.get("generation_tokens_per_s")
    reason = ""
    confidence: Confidence
    if tokens is None or not seen:
        confidence, reason = "withheld", "no generated tokens observed to check the twin against"
    elif tokens > MAX_TOKENS_ERROR:
        confidence = "withheld"
        reason = (
            f"the twin misses today's generated tokens/s by {tokens:.0%} "
            f"(more than {MAX_TOKENS_ERROR:.0%}): it does not describe this server"
        )
    else:
        confidence = min(
            [_grade(tokens, 0.10, 0.20)]
            + [_family_grade(families[f.name]) for f in FAMILIES if f.name != "throughput"],
            key=GRADES.index,
        )
    return SelfCheck(dict(observed), dict(twin), errors, confidence, reason, families)


GRADES: tuple[Confidence, ...] = ("low", "medium", "high")
"""The confidence of a check that is not withheld, worst first."""


def _grade(error: float, high: float, medium: float) -> Confidence:
    return "high" if error <= high else "medium" if error <= medium else "low"


def _family_grade(verdict: FamilyCheck) -> Confidence:
    """What one family's error allows the confidence to be: a family off its limit (its
    figures withheld) leaves at most "low", one within its limit but past half of it
    "medium". A twin that gets the token rate right and the queue 14x wrong does not describe
    the server, whatever its tokens/s; a family the server shows none of says nothing."""
    if verdict.error is None:
        return "high"
    if verdict.withheld:
        return "low"
    if verdict.family == "latency":
        return _grade(verdict.error, 1 + (MAX_LATENCY_FACTOR - 1) / 2, MAX_LATENCY_FACTOR)
    return _grade(verdict.error, MAX_OCCUPANCY_ERROR / 2, MAX_OCCUPANCY_ERROR)


@dataclass(frozen=True, slots=True)
class Prediction:
    """The figures after `changes`, each with its band; empty with the reason when withheld,
    and without the figures of a family the self-check found off (`withheld` says why)."""

    changes: dict[str, KnobValue]
    figures: dict[str, Band]
    twin_after: dict[str, float | None]
    confidence: Confidence
    reason: str = ""
    withheld: dict[str, str] = field(default_factory=dict)
    """Figure -> why it is not predicted."""


@dataclass(frozen=True, slots=True)
class WhatIf:
    """A twin fitted to one server over one window, checked, ready to run changes."""

    workload: WorkloadEstimate
    step: StepFit
    args: ServeArgs
    check: SelfCheck
    read: list[str] = field(default_factory=list)
    assumed: list[str] = field(default_factory=list)
    seed: int = 0

    def predict(self, changes: Mapping[str, KnobValue]) -> Prediction:
        """Run the twin with `changes` (several at once are one run) on the same workload."""
        wanted = dict(changes)
        after_args = changed(self.args, self.step.preset, wanted)
        withheld = self.check.withheld_figures()
        if self.check.withheld:
            return Prediction(wanted, {}, {}, "withheld", self.check.reason, withheld)
        after = run_twin(self.step.preset, after_args, self.workload.workload, seed=self.seed)
        token_error = self.check.errors["generation_tokens_per_s"] or 0.0
        widen = UNKNOWN_WIDEN * sum(
            1 for a in self.assumed if any(a.startswith(u) for u in UNKNOWNS)
        )
        bands: dict[str, Band] = {}
        for name in FIGURES:
            now, value = self.check.twin.get(name), after.get(name)
            if now is None or value is None or name in withheld:
                continue
            err = self.check.errors.get(name)
            width = max(BAND_FLOOR, err if err is not None else 2 * token_error) + widen
            floor = FLOORS[name]
            low = max(0.0, min(value * (1 - width), value - floor))
            bands[name] = Band(now, value, low, max(value * (1 + width), value + floor))
        return Prediction(wanted, bands, after, self.check.confidence, withheld=withheld)


@dataclass(frozen=True, slots=True)
class Observation:
    """What a what-if reads of the server, taken from the store at once (cheap): the fit and
    the twin's runs (`prepare_from`, seconds) need no store, so they may run on another thread
    while the store goes on taking polls."""

    workload: WorkloadEstimate
    args: ServeArgs
    read: list[str]
    assumed: list[str]
    prior: Preset
    prior_why: str
    points: list[StepPoint]
    observed: dict[str, float | None]
    window_s: float
    """The span read: the window asked for, or its part after a load change."""


def observe(
    store: Store,
    window_s: float,
    knobs: Mapping[str, Knob],
    *,
    gpu_name: str | None,
    scope: Scope = ENDPOINT,
) -> Observation:
    """Estimate the workload and read the steps and the figures over the window (its part
    after a load change, `workload.steady_window`)."""
    window_s, changed_load = steady_window(store, window_s, scope)
    work = estimate(store, window_s, scope)
    args, read, assumed = serve_args(knobs)
    if changed_load is not None:
        read.insert(0, changed_load)
    model = knobs.get("served_model_name")
    quant = knobs.get("quantization")
    prior, why = prior_preset(
        gpu_name,
        str(model.value) if model is not None else None,
        str(quant.value) if quant is not None else None,
    )
    if args.kv_cache_dtype != prior.kv_cache_dtype:
        prior = prior.with_kv_cache_dtype(args.kv_cache_dtype)
    capacity = (
        args.num_gpu_blocks_override * args.block_size if args.num_gpu_blocks_override else None
    )
    points = step_points(store, window_s, kv_capacity_tokens=capacity, scope=scope)
    observed = figures(store, window_s, scope)
    return Observation(work, args, read, assumed, prior, why, points, observed, window_s)


def prepare_from(seen: Observation, *, seed: int = 0) -> WhatIf:
    """Fit the step time to what was seen and self-check the twin against it."""
    work, args = seen.workload, seen.args
    budget = args.max_num_batched_tokens or seen.prior.default_max_num_batched_tokens
    chunk = min(work.prompt.mean * (1 - (work.prefix_hit or 0.0)), budget)
    step = fit(seen.points, seen.prior, seen.prior_why, prefill_chunk=chunk)
    twin = run_twin(step.preset, args, work.workload, seed=seed)
    return WhatIf(
        workload=work,
        step=step,
        args=args,
        check=check(seen.observed, twin),
        read=[*work.read, *seen.read, step.describe()],
        assumed=[*work.assumed, *seen.assumed],
        seed=seed,
    )


def prepare(
    store: Store,
    window_s: float,
    knobs: Mapping[str, Knob],
    *,
    gpu_name: str | None,
    scope: Scope = ENDPOINT,
    seed: int = 0,
) -> WhatIf:
    """Estimate the workload, fit the step time and self-check the twin over the window."""
    seen = observe(store, window_s, knobs, gpu_name=gpu_name, scope=scope)
    return prepare_from(seen, seed=seed)
