"""The twin's step time fitted to the server it watches, with a hardware preset as the prior.

A server's metrics show its steps only on average, but they do show them: over each chunk of
the window (`CHUNK_S`) the iteration_tokens histogram counts the steps and the tokens they
scheduled, `running` is the requests per step, KV usage times the pool is the context read,
and the chunk's busy seconds (polls with something running) divided by its steps is the step
time. Without the iteration histogram (older vLLM), the inter-token latency's mean stands for
the step time and the token rates give the tokens per step. Each chunk is one `StepPoint`.

Evidence from one steady window is thin: the points sit at one batch size, and a four-term
law fitted to them says nothing about a batch twice as wide. So the fit has three grades:

- "fitted": at least `MIN_POINTS` points spanning `MIN_SPREAD`x in tokens per step: the
  calibration's own least squares (`vtop.sim.calibration.fit_step_time`) on them.
- "scaled prior": some points, little spread: the prior preset's step law (a roofline for a
  GPU, the fitted law for the CPU build) times one factor, the median of observed / prior step
  time over the points. The preset carries the shape (decode memory-bound, prefill
  compute-bound); the server sets the scale.
- "prior": no usable points: the preset as it is.

One more thing a single configuration does show: what a prompt token costs. A request's
prefill time is the step that carried its prompt, and the window's other steps are decode
steps (the busy time less the prefill steps, over their count), so a prompt of n tokens costs
prefill - decode for n - 1 tokens more than a decode step (`prompt_token_cost`). A seat of a
decode step costs a prompt token's compute (the same rows through the same weights) and some
bookkeeping; the CPU preset knows both on its own machine (`FittedStepTime.prompt_token_s`),
and a machine that computes slower than it steps scales the two apart. So where the window's
prompt token costs more than the scaled preset's, the law charges a token that cost and a
seat that cost plus the preset's bookkeeping at the scaled level (`fit(prompt_token_s=...)`).
On the preset's own machine the two agree (0.65-0.78 ms a prompt token at its level, 0.71 in
the preset) and little moves; in float32 on a CPU without AVX-512 (3.2-3.8 ms, the scaled
preset 1.4-1.5) the scaled preset priced a 9-seat step at 54 ms where it measured 74 and
promised +224 % throughput where the raise gave +140 %; it now predicts +123 %. The
bookkeeping may be negative: the CPU without AVX-512 steps a decode seat for less than it
prefills a prompt token (2.3 against 3.1 ms), and a seat charged the whole dearer token priced
its 24-seat steps 48 points too dear in a replayed budget-bound sweep (23 with the seat kept
below the token). The law's floor stays where the plain scaling put it when the steps seen lie
above it (the line alone relevels): a well-tuned 16-seat window on the AVX-512 machine read a
prompt token 1.6x the scaled preset's, and the floor releveled with the line put its 4-seat step
25 % under the real one (predicted -38 %, measured -51 %; -49 % with the floor kept).

The prior is the preset for the GPU the server runs on (NVML or the page) and, among those,
the one serving the same model; no GPU means the CPU build's preset: the one fitted on a CPU
without AVX-512 or AMX where vtop read the host's flags and found neither (the knob
`fp8_kv_supported` false: vLLM runs in float32 there and every seat adds to the step, where the
AVX-512 CPU's steps cost the same up to five tokens; its shape carried 4 seats +65 % where the
server gave +40 %).

What the metrics do not show: vLLM counts a step's tokens as the prompts that got their first
token plus the tokens generated, so the prompt a preempted request recomputes, a prefill chunk
that samples nothing and a step that generates nothing are priced into the step time but
missing from its tokens. Priced at its visible tokens, a preempting server looks slow, and a
law scaled to it is slow twice over once the twin recomputes those prompts itself (12-20 %
low on the real KV-exhausted server). So the fit is checked through the twin: the twin runs
with the law, its pages are read into step points exactly as the server's were, and the law
is rescaled by the twin's own visible-to-priced ratio (`recalibrated`). Whatever the metrics
leave out, they leave out on both sides.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

from vtop.figures import ENDPOINT, Scope
from vtop.model import Histogram
from vtop.signals import histogram as hist
from vtop.signals.store import Store
from vtop.sim.calibration import StepPoint, fit_step_time
from vtop.sim.calibration import predict as predict_step
from vtop.sim.hardware import (
    CPU_ENGINE,
    CPU_ENGINE_NO_AVX512,
    PRESETS,
    QWEN_4090_AWQ,
    FittedStepTime,
    Preset,
    StepCost,
)

CHUNK_S = 30.0
"""The span of one step point: long enough for hundreds of steps, short enough for several."""
MIN_POINTS = 4
MIN_SPREAD = 3.0
"""A full fit needs this many points, their tokens per step spanning this factor."""
FLATTER = 0.5
"""A law fitted to several configurations whose step grows, past the widest step seen, less than
this share of what the prior's grows is not trusted there (`flatter_than_prior`)."""
RECALIBRATE_ABOVE = 0.02
"""The twin's visible step time off its law by more than this share: the law is rescaled."""
RELEVEL_TRIES = 50
RELEVEL_WITHIN = 1e-4
"""A law steepened by a dearer prompt token is releveled to the step seen until it moves less
than this share (its floor stays, so the line alone carries the level: a few rounds)."""
MIN_PREFILLS = 8
"""Prompts a window must see prefilled before their cost is read (`prompt_token_cost`)."""
DECODE_AGREES = 0.25
"""The decode step read from the busy time within this share of the mean inter-token latency,
or the prefill times hold more than one step each and say nothing of a prompt token. The mean,
not the median: vLLM's ITL buckets (25, 50 ms) put a median of 30 ms steps at 38 ms, and a
2-seat window whose decode step was 28 ms read as disagreeing."""


@dataclass(frozen=True, slots=True)
class StepFit:
    """The preset the twin runs with, and how it was arrived at."""

    preset: Preset
    grade: str
    """"fitted", "scaled prior" or "prior"."""
    prior: str
    """The prior preset's name and why it was chosen."""
    points: tuple[StepPoint, ...]
    scale: float
    """observed / prior step time ("scaled prior"), else 1."""

    base: Preset | None = None
    """The prior preset as chosen, before any fitting or scaling (None: `preset` is it)."""
    invisible: float = 1.0
    """The twin's step time over its law's price at the tokens its pages show: the work the
    metrics leave out (1: none), divided out of the law by `recalibrated`."""

    earlier: int = 0
    """How many of `points` were measured on the same server at other configurations."""
    prompt_token_s: float | None = None
    """The cost of a prompt token the window showed, where it steepened the law (else None)."""

    def window_points(self) -> tuple[StepPoint, ...]:
        """This window's own points with the uncounted work divided out: what the step law
        costs at their tokens, comparable with points read at another configuration."""
        own = self.points[self.earlier :] if self.earlier else self.points
        return tuple(replace(p, step_s=p.step_s / self.invisible) for p in own)

    def describe(self) -> str:
        if self.earlier:
            return (
                f"step time {self.grade} from {len(self.points)} points "
                f"({self.earlier} at other configurations of this server); prior {self.prior}"
            )
        hidden = (
            f" (+{self.invisible - 1:.0%} of work the token counts miss: recompute, prefill)"
            if self.invisible > 1 + RECALIBRATE_ABOVE
            else ""
        )
        steeper = (
            f", {self.prompt_token_s * 1e3:.2g} ms a token as a prompt token costs here"
            if self.prompt_token_s is not None
            else ""
        )
        return (
            f"step time {self.grade} from {len(self.points)} points{hidden}{steeper}; "
            f"prior {self.prior}"
        )


def prior_preset(
    gpu_name: str | None,
    model: str | Sequence[str] | None,
    quantization: str | None = None,
    *,
    avx512: bool | None = None,
) -> tuple[Preset, str]:
    """The preset closest to the server: its GPU, then its model (any of the names it is
    served under) and quantisation; without a GPU, the CPU build's preset for a CPU with
    AVX-512 or AMX or, where `avx512` is False, the one for a CPU without (float32, every seat
    adding to the step)."""
    names = {model} if isinstance(model, str) else set(model or ())
    if not gpu_name:
        if avx512 is False:
            cpu = CPU_ENGINE_NO_AVX512
            return cpu, f"{cpu.name} (no GPU: the CPU build, on a CPU without AVX-512 or AMX)"
        return CPU_ENGINE, f"{CPU_ENGINE.name} (no GPU: the CPU build)"
    same_gpu = [p for p in PRESETS.values() if p.gpu is not None and p.gpu.name == gpu_name]
    if not same_gpu:
        return QWEN_4090_AWQ, f"{QWEN_4090_AWQ.name} (no preset for {gpu_name}: assumed)"

    def closeness(p: Preset) -> tuple[bool, bool]:
        quant = (p.quantization or "none").split("_")[0]
        wanted = (quantization or "none").split("_")[0]
        return p.served_model_name in names, quant == wanted

    best = max(same_gpu, key=closeness)
    why = "same GPU and model" if best.served_model_name in names else "same GPU"
    return best, f"{best.name} ({why})"


def _priced(preset: Preset, tokens: float, seqs: float, context: float) -> float:
    """One step of `tokens` for `seqs` requests of `context` KV tokens, by the preset's law:
    decodes read their context once each, a prefill chunk attends over itself (~n^2 / 2)."""
    p = StepPoint("prior", tokens, seqs, context, 0.0)
    if preset.fitted is not None:
        return predict_step(preset.fitted, p)
    chunk = max(0.0, tokens - seqs)
    n = max(1, round(seqs))
    kernel, host = StepCost(preset).step(
        round(tokens), round(context + tokens), context + chunk * chunk / 2, n, n
    )
    return kernel + host


def prior_step_s(preset: Preset, p: StepPoint, prefill_chunk: float | None = None) -> float:
    """The mean step time the preset gives the point's average step.

    An average of 55 tokens is not one 55-token step: it is mostly decode steps of `seqs`
    tokens and now and then one that also prefills a prompt chunk of `prefill_chunk` tokens.
    A roofline is convex in tokens (memory-bound, then compute-bound), so the mix is priced
    as such: a share f = prefill tokens / chunk of the steps carries a chunk.
    """
    decode = min(p.seqs, p.tokens)
    extra = p.tokens - decode
    if extra <= 0 or not prefill_chunk or prefill_chunk <= extra:
        return _priced(preset, p.tokens, p.seqs, p.context)
    share = extra / prefill_chunk
    return (1 - share) * _priced(preset, decode, p.seqs, p.context) + share * _priced(
        preset, decode + prefill_chunk, p.seqs, p.context
    )


def scaled(preset: Preset, factor: float) -> Preset:
    """The preset with every step `factor` times as long."""
    if preset.fitted is not None:
        return replace(preset, fitted=_scaled_law(preset.fitted, factor))
    return replace(
        preset,
        compute_efficiency=preset.compute_efficiency / factor,
        memory_efficiency=preset.memory_efficiency / factor,
        overhead_base_s=preset.overhead_base_s * factor,
        overhead_per_seq_s=preset.overhead_per_seq_s * factor,
    )


def _scaled_law(f: FittedStepTime, factor: float) -> FittedStepTime:
    """The law with every term (each one seconds) scaled alike: a field added to the law is
    scaled without being named here."""
    return FittedStepTime(**{term.name: getattr(f, term.name) * factor for term in fields(f)})


def _chunk_edges(times: Sequence[float], chunk_s: float) -> list[int]:
    edges = [0]
    for i, t in enumerate(times):
        if t - times[edges[-1]] >= chunk_s:
            edges.append(i)
    last = len(times) - 1
    if last > edges[-1] and times[last] - times[edges[-1]] >= chunk_s / 2:
        edges.append(last)  # a trailing chunk of at least half the span counts too
    return edges


def _mean(values: Sequence[float | None]) -> float | None:
    seen = [v for v in values if v is not None]
    return sum(seen) / len(seen) if seen else None


def _delta(values: Sequence[float | None], a: int, b: int) -> float | None:
    va, vb = values[a], values[b]
    return vb - va if va is not None and vb is not None else None


def step_points(
    store: Store,
    window_s: float | None,
    *,
    kv_capacity_tokens: float | None,
    scope: Scope = ENDPOINT,
    chunk_s: float = CHUNK_S,
) -> list[StepPoint]:
    """One average step per chunk of the window in which the engine ran (see the docstring)."""
    times = store.times(window_s)
    running = store.values(scope.key("running"), window_s)
    kv = store.values(scope.key("kv_usage"), window_s)
    prompt = store.values(scope.key("prompt_tokens"), window_s)
    gen = store.values(scope.key("generation_tokens"), window_s)
    iters = store.hist_values(scope.key("iteration_tokens"), window_s)
    itl = store.hist_values(scope.key("itl"), window_s)
    prompt_len = hist.mean(store.hist_delta(scope.key("prompt_len"), window_s))
    gen_len = hist.mean(store.hist_delta(scope.key("generation_len"), window_s))
    points: list[StepPoint] = []
    edges = _chunk_edges(times, chunk_s)
    for a, b in itertools.pairwise(edges):
        seconds = times[b] - times[a]
        polls = running[a + 1 : b + 1]
        seqs = _mean([r for r in polls if r is not None and r > 0])
        busy_s = _busy_s(seconds, polls)
        if seqs is None or busy_s is None or seconds <= 0:
            continue
        steps_h = _hist_between(iters, a, b)
        if steps_h is not None and steps_h.count > 0:
            steps = steps_h.count
            tokens = steps_h.sum / steps
            step_s = busy_s / steps
        else:
            itl_h = _hist_between(itl, a, b)
            tokens_made = (_delta(prompt, a, b) or 0.0) + (_delta(gen, a, b) or 0.0)
            if itl_h is None or not itl_h.count > 0 or tokens_made <= 0:
                continue
            step_s = itl_h.sum / itl_h.count
            tokens = tokens_made / (busy_s / step_s)
        usage = _mean(kv[a + 1 : b + 1])
        if kv_capacity_tokens and usage is not None:
            context = usage * kv_capacity_tokens
        else:
            context = seqs * ((prompt_len or 0.0) + (gen_len or 0.0) / 2)
        points.append(StepPoint(f"t+{times[a] - times[0]:.0f}s", tokens, seqs, context, step_s))
    return points


def _busy_s(seconds: float, running: Sequence[float | None]) -> float | None:
    """The share of `seconds` the engine ran something, by the polls of `running` that saw it."""
    seen = [r for r in running if r is not None]
    return seconds * sum(1 for r in seen if r > 0) / len(seen) if seen else None


def _hist_between(column: Sequence[Histogram | None], a: int, b: int) -> Histogram | None:
    if not column:
        return None
    old, new = column[a], column[b]
    if old is None or new is None:
        return None
    return hist.delta(new, old)


def prompt_token_cost(
    store: Store, window_s: float | None, *, prompt_tokens: float, scope: Scope = ENDPOINT
) -> float | None:
    """Seconds a prompt token adds to a step, read from the window's prefill times (see the
    module's docstring), for prompts of `prompt_tokens` computed tokens (the prefix cache's
    hits taken off) that fit one step. None where the window cannot say: fewer than
    `MIN_PREFILLS` prompts, a preemption (a recomputed prompt's prefill time spans its wait),
    prefill steps too many to leave decode steps apart, or a decode step that disagrees with
    the mean inter-token latency by more than `DECODE_AGREES` (prompts prefilled together,
    or a front end that hands first tokens out late)."""
    prefills = store.hist_delta(scope.key("prefill_time"), window_s)
    steps_h = store.hist_delta(scope.key("iteration_tokens"), window_s)
    itl_mean = store.hist_mean(scope.key("itl"), window_s)
    times = store.times(window_s)
    busy_s = (
        _busy_s(times[-1] - times[0], store.values(scope.key("running"), window_s))
        if len(times) >= 2
        else None
    )
    if (
        prefills is None
        or steps_h is None
        or itl_mean is None
        or busy_s is None
        or prefills.count < MIN_PREFILLS
        or prompt_tokens <= 1
        or (store.per_second(scope.key("preemptions"), window_s) or 0.0) > 0
    ):
        return None
    decode_steps = steps_h.count - prefills.count
    if decode_steps < 2 * prefills.count:
        return None
    decode_s = (busy_s - prefills.sum) / decode_steps
    if decode_s <= 0 or abs(decode_s / itl_mean - 1) > DECODE_AGREES:
        return None
    prefill_s = prefills.sum / prefills.count
    return (prefill_s - decode_s) / (prompt_tokens - 1) if prefill_s > decode_s else None


def fit(
    points: Sequence[StepPoint],
    prior: Preset,
    prior_why: str,
    *,
    prefill_chunk: float | None = None,
    prompt_token_s: float | None = None,
) -> StepFit:
    """The step law the points and the prior support (see the module's grades);
    `prefill_chunk`: the prompt tokens one step prefills (mean prompt, capped by the budget);
    `prompt_token_s`: what a prompt token was seen to cost (`prompt_token_cost`), which a
    scaled prior's fitted law charges where it is dearer than the law's own (see the module's
    docstring)."""
    pts = tuple(points)
    if len(pts) >= MIN_POINTS:
        spread = max(p.tokens for p in pts) / max(min(p.tokens for p in pts), 1e-9)
        if spread >= MIN_SPREAD:
            fitted = replace(prior, fitted=fit_step_time(pts))
            return StepFit(fitted, "fitted", prior_why, pts, 1.0, prior)
    if not pts:
        return StepFit(prior, "prior", prior_why, pts, 1.0, prior)
    factor = statistics.median(p.step_s / prior_step_s(prior, p, prefill_chunk) for p in pts)
    law = scaled(prior, factor)
    f = law.fitted
    if (
        f is None
        or not f.prompt_token_s  # the law's machine never had its prompt token measured
        or prompt_token_s is None
        or prompt_token_s <= f.prompt_token_s
    ):
        return StepFit(law, "scaled prior", prior_why, pts, factor, prior)
    # a seat's cost apart from its token's compute, at the scaled level: negative where the law's
    # machine steps a decode seat cheaper than it prefills a prompt token (a CPU without AVX-512)
    bookkeeping = f.per_token_s + f.per_seq_s - f.prompt_token_s
    # Decode steps seen above the law's floor say nothing of it: the floor (what the smallest
    # steps cost) stays where the plain scaling put it and the line alone relevels (16 seats on
    # an AVX-512 CPU: the floor scaled with the line put the 4-seat step 25 % under the real
    # one). Steps seen on the floor are its only evidence, and it moves with the line.
    floor = f.kernel_floor_s if all(_above_floor(f, p) for p in pts) else None
    for _ in range(RELEVEL_TRIES):  # a dearer token leaves less of the step seen to the rest
        trial = replace(
            f, per_token_s=prompt_token_s, per_seq_s=bookkeeping, prompt_token_s=prompt_token_s
        )
        level = statistics.median(
            p.step_s / prior_step_s(replace(law, fitted=trial), p, prefill_chunk) for p in pts
        )
        f = _scaled_law(trial, level)
        if floor is not None:
            f = replace(f, kernel_floor_s=floor)
        bookkeeping *= level
        factor *= level
        if abs(level - 1) < RELEVEL_WITHIN:
            break
    law = replace(law, fitted=f)
    return StepFit(
        law, "scaled prior", prior_why, pts, factor, prior, prompt_token_s=prompt_token_s
    )


def _above_floor(law: FittedStepTime, p: StepPoint) -> bool:
    """Whether the point's decode step (a token a request) is priced above the law's floor."""
    decode = min(p.seqs, p.tokens)
    return law.kernel_s(decode, p.seqs, p.context) > law.kernel_floor_s


def invisible_work(
    step: StepFit, twin_points: Sequence[StepPoint], prefill_chunk: float | None = None
) -> float | None:
    """The twin's measured step time over its own law's price of the same visible point
    (median over the points; None without points): how much of a step the metrics miss."""
    ratios = [
        p.step_s / priced
        for p in twin_points
        if (priced := prior_step_s(step.preset, p, prefill_chunk)) > 0
    ]
    return statistics.median(ratios) if ratios else None


def recalibrated(step: StepFit, ratio: float | None) -> StepFit | None:
    """`step` with its law divided by `ratio` (see the module's docstring), or None where the
    law stands: no observed points (a prior is not fitted to anything) or a ratio within
    `RECALIBRATE_ABOVE` of 1."""
    if not step.points or ratio is None or abs(ratio - 1) <= RECALIBRATE_ABOVE:
        return None
    return replace(
        step, preset=scaled(step.preset, 1 / ratio), scale=step.scale / ratio, invisible=ratio
    )


def pooled(
    step: StepFit, earlier: Sequence[StepPoint], prefill_chunk: float | None = None
) -> StepFit | None:
    """The law refitted to this window's points (its uncounted work divided out, as
    `window_points`) and `earlier` ones, measured the same way on the same server at other
    configurations: steps of other sizes, which a window at one configuration cannot show.
    None without earlier points, or where the law fitted to them grows slower than the prior
    past the widest step seen (`flatter_than_prior`): the prior's shape stands then."""
    if not earlier:
        return None
    own = step.window_points()
    prior = step.base or step.preset
    both = fit([*earlier, *own], prior, step.prior, prefill_chunk=prefill_chunk)
    if both.grade == "fitted" and flatter_than_prior(both.preset, prior, [*earlier, *own]):
        return None
    return replace(both, points=(*earlier, *own), earlier=len(earlier), invisible=step.invisible)


def flatter_than_prior(law: Preset, prior: Preset, points: Sequence[StepPoint]) -> bool:
    """Whether `law` prices a step twice as wide as the widest of `points` as growing less
    than `FLATTER` times as much as `prior` does. Steps that cost the same at two batch sizes
    (a CPU's up to eight seats, then ~1.7x) say nothing of where the cost bends: a law fitted
    flat to them promised the real server 1.1k tok/s at 24 seats, which measured 439 and
    missed the ITL bound by 2x."""
    widest = max(points, key=lambda p: p.tokens)
    wider = replace(
        widest, tokens=2 * widest.tokens, seqs=2 * widest.seqs, context=2 * widest.context
    )

    def growth(preset: Preset) -> float:
        return _priced(preset, wider.tokens, wider.seqs, wider.context) / max(
            _priced(preset, widest.tokens, widest.seqs, widest.context), 1e-12
        )

    return growth(law) - 1 < (growth(prior) - 1) * FLATTER
