"""The twin run on the observed workload: a self-check at today's knobs, then the change.

A prediction is only worth showing if the twin reproduces today. So `prepare` builds the twin
from what the server exposes (its knobs, the workload `workload.estimate` reads, the step law
`fit.fit` finds), runs it at today's knobs and has `check.check` compare its figures with the
observed ones; `WhatIf.predict` then runs it with changed knobs on the same workload and seed.
The server comes in as a `Watched` (its store, knobs and GPU), never as the monitor.

- `observe` takes from the store what the fit needs (cheap, on the thread that feeds it);
  `prepare_from` fits and runs the twin on that alone (seconds, on any thread).
- A predicted figure carries a band: the after value times 1 +- that figure's self-check error
  (at least `BAND_FLOOR`; a figure the server did not show gets the token error doubled),
  widened by `UNKNOWN_WIDEN` for each of the inputs a change leans on that had to be assumed
  (`UNKNOWNS`: the length distributions, the batch cap, the KV pool): today's self-check can
  pass on an assumption that the changed configuration exposes. The band is never narrower
  than the figure's floor either side (a predicted 0 preemptions/s reads 0-0.1, not 0-0), and
  widened by `REACH_WIDEN` for each doubling (or halving) of the batch past the sizes the
  window's steps ran at (`batch_reach`): there the step's shape is the preset's. A
  family the self-check withheld is not predicted (`Prediction.withheld` says why). The
  figures the step law sets (`STEP_FIGURES`: tokens/s, ITL) are stated from what the server
  showed, times the twin's change: the twin's bias at today's knobs is its bias after.
- Cost: the twin runs `WARMUP_S` virtual seconds to fill its batch, then `SPAN_S` measured
  seconds read every `PAGE_EVERY_S`: five minutes of workload. Pages are what costs (rendering
  and parsing one is ~25 ms); counters and histogram increases only need the two ends, and 25
  gauge samples give their means. `bench/whatif.py` prints the time.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from vtop.figures import ENDPOINT, Scope
from vtop.knobs import KNOBS, KnobValue, is_number, twin_knobs
from vtop.model import Knob
from vtop.signals.extract import PageReader
from vtop.signals.store import Store
from vtop.sim.calibration import StepPoint
from vtop.sim.hardware import Preset
from vtop.sim.serve_args import ServeArgs
from vtop.sim.twin import Twin
from vtop.sim.workload import Workload
from vtop.whatif.check import (
    FIGURES,
    FLOORS,
    QUEUE_FIGURES,
    Confidence,
    SelfCheck,
    check,
    figures,
    queue_unjudged,
    relative_error,
)
from vtop.whatif.fit import (
    StepFit,
    fit,
    invisible_work,
    pooled,
    prior_preset,
    prompt_token_cost,
    recalibrated,
    step_points,
)
from vtop.whatif.watched import Watched
from vtop.whatif.workload import WorkloadEstimate, estimate, steady_window

WARMUP_S = 30.0
SPAN_S = 120.0
PAGE_EVERY_S = 10.0
"""Virtual seconds the twin runs before it is read, how long it is read, and how often."""

BAND_FLOOR = 0.10
"""The narrowest band a prediction carries: the real server's own run-to-run spread (the same
configuration and load measured 392 and 439 tokens/s in two runs of bench/whatif_real.py)."""
REACH_WIDEN = 0.06
"""Added to a band for each doubling of the batch past those the window's steps ran at. A law
fitted at one batch size takes its shape from the preset, and CPUs of one kind differ there:
a 2-seat window on an AVX-512 CPU whose steps have no flat bottom predicted 8 seats +185 %
(measured +154 %: the step 1.40x where it was 1.58x, 12 % off over two doublings); a float32
one predicted 4 seats +77 % (measured +56 %: 13 % over one). The band said ±10 % of the after
value at "confidence high", and the measurement sat on its edge."""
UNKNOWN_WIDEN = 0.10
UNKNOWNS = ("prompt lengths", "generation lengths", "max_num_seqs", "KV pool")
"""Assumed inputs (by the start of their `assumed` line) that widen every band."""
STEP_FIGURES = ("generation_tokens_per_s", "itl_p50", "itl_mean")
"""The figures the step law sets: their predicted change is applied to what the server showed
(the twin's after times observed / twin's today). A twin 17 % low on tokens/s at 8 seats
predicted +31 % at 14 on the real CPU server, which measured +28 %: its after alone (323) fell
outside its band of the measured 379, today's 295 x 1.31 (387) within 2 %. Queues and TTFT are
left as the twin has them: a queue still filling is further from its steady state than the
twin is."""

KNOB_FIELDS: Final[dict[str, type]] = {name: KNOBS[name].kind for name in twin_knobs()}
"""The knobs a what-if can set (ServeArgs fields) and their types, as `vtop.knobs` says."""


PINNED = "num_gpu_blocks_override"
"""The flag that pins the KV pool's block count: vLLM then keeps the count whatever the cache's
dtype or the memory it may use (`kv_cache_utils.get_num_blocks`), so an FP8 cache holds the
same tokens in half the memory."""


def pool_pinned(knobs: Mapping[str, Knob]) -> bool:
    """Whether the server's KV pool is pinned by `--num-gpu-blocks-override`."""
    knob = knobs.get(PINNED)
    return knob is not None and knob.value is not None


def serve_args(knobs: Mapping[str, Knob]) -> tuple[ServeArgs, list[str], list[str]]:
    """The twin's knobs from the discovered ones; (args, read, assumed)."""
    values: dict[str, KnobValue] = {}
    read: list[str] = []
    assumed: list[str] = []
    for name, kind in KNOB_FIELDS.items():
        if name == PINNED:
            continue  # the twin's pool is the one read below, pinned or not
        knob = knobs.get(name)
        if knob is None or knob.value is None:
            assumed.append(f"{name}: unknown, the preset's default")
            continue
        values[name] = kind(knob.value)
        (assumed if knob.assumed else read).append(f"{name}={knob.value} ({knob.detail})")
    blocks = knobs.get("num_gpu_blocks")
    if blocks is not None and isinstance(blocks.value, int | float) and blocks.value > 0:
        values[PINNED] = int(blocks.value)
        read.append(f"num_gpu_blocks={blocks.value} ({blocks.detail})")
        if pool_pinned(knobs):
            read.append(f"{PINNED}={knobs[PINNED].value}: the pool's blocks pinned by the flag")
    else:
        assumed.append("KV pool: sized by the preset's memory arithmetic")
    return ServeArgs(**values), read, assumed  # type: ignore[arg-type]


def changed(
    args: ServeArgs,
    preset: Preset,
    changes: Mapping[str, KnobValue],
    *,
    pinned: bool = False,
) -> ServeArgs:
    """`args` with `changes` applied; a KV pool read from the server is resized for a new
    kv_cache_dtype or gpu_memory_utilization as vLLM would size it: not at all where the
    server's pool is `pinned` (`PINNED`), and to the blocks a change of `PINNED` sets."""
    for name in changes:
        if name not in KNOB_FIELDS:
            raise ValueError(f"unknown knob {name!r}; a what-if can set {', '.join(KNOB_FIELDS)}")
    typed = {name: KNOB_FIELDS[name](value) for name, value in changes.items()}
    for name, value in typed.items():
        zero_ok = name == "long_prefill_token_threshold"  # 0: no threshold
        if is_number(value) and (value < 0 or (value == 0 and not zero_ok)):
            raise ValueError(f"{name}={value}: the twin needs {'>= 0' if zero_ok else '> 0'}")
    new = replace(args, **typed)
    blocks = args.num_gpu_blocks_override
    if blocks is not None and PINNED not in typed and not pinned:
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


def twin_store(
    preset: Preset,
    args: ServeArgs,
    workload: Workload,
    *,
    seed: int = 0,
    warmup_s: float = WARMUP_S,
    span_s: float = SPAN_S,
    page_every_s: float = PAGE_EVERY_S,
) -> Store:
    """The twin run on `workload` at `args`, its pages read into a store by vtop's parser."""
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
    return store


def run_twin(
    preset: Preset, args: ServeArgs, workload: Workload, *, seed: int = 0
) -> dict[str, float | None]:
    """The twin's figures on `workload` at `args`, read through vtop's parser and store."""
    return figures(twin_store(preset, args, workload, seed=seed), None)


@dataclass(frozen=True, slots=True)
class Band:
    """A predicted figure: today's, after the change, and the band around it. Today's is the
    server's own for the `STEP_FIGURES` it showed (after and band scaled with it), else the
    twin's steady state at today's knobs."""

    now: float
    after: float
    low: float
    high: float
    seen: float | None = None
    """What the server showed today, where it did. Where `now` is the twin's (not a step
    figure), a queue still filling, or a self-check within its limit but not exact, leaves
    the two apart."""

    def seen_apart(self, name: str) -> bool:
        """Whether today's measured figure is further from the twin's `now` than the
        narrowest band: a line that states `now` then says what was seen beside it."""
        error = relative_error(name, self.now, self.seen)
        return error is not None and error > BAND_FLOOR


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


def batch_reach(points: Sequence[StepPoint], running: float | None) -> float:
    """Doublings (or halvings) from the batch sizes the window's steps ran at to `running`, the
    batch the twin runs after a change (0 inside them, or with nothing to compare)."""
    seen = [p.seqs for p in points if p.seqs > 0]
    if not seen or running is None or running <= 0:
        return 0.0
    return max(0.0, math.log2(running / max(seen)), math.log2(min(seen) / running))


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
    pool_pinned: bool = False
    """The server's KV pool is pinned by `--num-gpu-blocks-override` (`changed`)."""

    def predict(self, changes: Mapping[str, KnobValue]) -> Prediction:
        """Run the twin with `changes` (several at once are one run) on the same workload."""
        wanted = dict(changes)
        after_args = changed(self.args, self.step.preset, wanted, pinned=self.pool_pinned)
        withheld = self.check.withheld_figures()
        if self.check.withheld:
            return Prediction(wanted, {}, {}, "withheld", self.check.reason, withheld)
        after = run_twin(self.step.preset, after_args, self.workload.workload, seed=self.seed)
        token_error = self.check.errors["generation_tokens_per_s"] or 0.0
        widen = UNKNOWN_WIDEN * sum(
            1 for a in self.assumed if any(a.startswith(u) for u in UNKNOWNS)
        ) + REACH_WIDEN * batch_reach(self.step.points, after.get("running"))
        bands: dict[str, Band] = {}
        for name in FIGURES:
            now, value = self.check.twin.get(name), after.get(name)
            if now is None or value is None or name in withheld:
                continue
            err = self.check.errors.get(name)
            width = max(BAND_FLOOR, err if err is not None else 2 * token_error) + widen
            floor = FLOORS[name]
            seen = self.check.observed.get(name)
            if name in STEP_FIGURES and seen is not None and min(now, seen) > floor:
                now, value = seen, value * seen / now
            low = max(0.0, min(value * (1 - width), value - floor))
            high = max(value * (1 + width), value + floor)
            bands[name] = Band(now, value, low, high, seen)
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
    prompt_token_s: float | None = None
    """What a prompt token was seen to add to a step (`fit.prompt_token_cost`; None: unread)."""
    queue_unjudged: str = ""
    """Why the window's queue times are not held against the twin (`check.queue_unjudged`)."""
    knobs: Mapping[str, Knob] = field(default_factory=dict)
    """The server's knobs as read (`Watched.knobs`): today's value of a knob a choice sets."""


def model_names(knobs: Mapping[str, Knob]) -> tuple[str, ...]:
    """The names the served model is known by: the model argument and the served name."""
    found = (knobs.get(name) for name in ("model", "served_model_name"))
    return tuple(str(k.value) for k in found if k is not None and k.value)


def observe(watched: Watched, window_s: float, *, scope: Scope = ENDPOINT) -> Observation:
    """Estimate the workload and read the steps and the figures over the window (its part
    after a load change, `workload.steady_window`)."""
    store, knobs = watched.store, watched.knobs
    window_s, changed_load = steady_window(store, window_s, scope)
    work = estimate(store, window_s, scope)
    args, read, assumed = serve_args(knobs)
    if changed_load is not None:
        read.insert(0, changed_load)
    quant = knobs.get("quantization")
    fp8_kv = knobs.get("fp8_kv_supported")  # read off the host CPU's AVX-512 and AMX flags
    prior, why = prior_preset(
        watched.gpu_name,
        model_names(knobs),
        str(quant.value) if quant is not None else None,
        avx512=None if fp8_kv is None or fp8_kv.value is None else bool(fp8_kv.value),
    )
    if args.kv_cache_dtype != prior.kv_cache_dtype:
        prior = prior.with_kv_cache_dtype(args.kv_cache_dtype)
    capacity = (
        args.num_gpu_blocks_override * args.block_size if args.num_gpu_blocks_override else None
    )
    points = step_points(store, window_s, kv_capacity_tokens=capacity, scope=scope)
    observed = figures(store, window_s, scope)
    computed = computed_prompt(work)
    per_prompt_token = (
        prompt_token_cost(store, window_s, prompt_tokens=computed, scope=scope)
        if computed <= prefill_chunk(work, args, prior)  # each prompt prefilled in one step
        else None
    )
    return Observation(
        work,
        args,
        read,
        assumed,
        prior,
        why,
        points,
        observed,
        window_s,
        per_prompt_token,
        queue_unjudged(store, window_s, scope),
        dict(knobs),
    )


def computed_prompt(work: WorkloadEstimate) -> float:
    """The prompt tokens a request has computed: the mean prompt less its prefix-cache hits."""
    return work.prompt.mean * (1 - (work.prefix_hit or 0.0))


def prefill_chunk(work: WorkloadEstimate, args: ServeArgs, prior: Preset) -> float:
    """The prompt tokens one step prefills: the computed prompt, at most the step's budget."""
    budget = args.max_num_batched_tokens or prior.default_max_num_batched_tokens
    return min(computed_prompt(work), budget)


def prepare_from(seen: Observation, *, seed: int = 0, earlier: Sequence[StepPoint] = ()) -> WhatIf:
    """Fit the step time to what was seen and self-check the twin against it. `earlier`:
    step points of the same server at other configurations (`StepFit.window_points` of their
    fits), pooled with this window's once its uncounted work is known (`fit.pooled`)."""
    work, args = seen.workload, seen.args
    chunk = prefill_chunk(work, args, seen.prior)
    step = fit(
        seen.points,
        seen.prior,
        seen.prior_why,
        prefill_chunk=chunk,
        prompt_token_s=seen.prompt_token_s,
    )
    store = twin_store(step.preset, args, work.workload, seed=seed)
    capacity = (
        args.num_gpu_blocks_override * args.block_size if args.num_gpu_blocks_override else None
    )
    seen_by_twin = step_points(store, None, kv_capacity_tokens=capacity)
    corrected = recalibrated(step, invisible_work(step, seen_by_twin, chunk))
    if corrected is not None:
        step = corrected
        store = twin_store(step.preset, args, work.workload, seed=seed)
    both = pooled(step, earlier, chunk)
    if both is not None:
        step = both
        store = twin_store(step.preset, args, work.workload, seed=seed)
    twin = figures(store, None)
    unjudged = QUEUE_FIGURES if seen.queue_unjudged else ()
    return WhatIf(
        workload=work,
        step=step,
        args=args,
        check=check(seen.observed, twin, unjudged),
        read=[*work.read, *seen.read, step.describe(), *filter(None, [seen.queue_unjudged])],
        assumed=[*work.assumed, *seen.assumed],
        seed=seed,
        pool_pinned=pool_pinned(seen.knobs),
    )


def prepare(watched: Watched, window_s: float, *, scope: Scope = ENDPOINT, seed: int = 0) -> WhatIf:
    """Estimate the workload, fit the step time and self-check the twin over the window."""
    return prepare_from(observe(watched, window_s, scope=scope), seed=seed)
