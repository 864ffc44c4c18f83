"""The best setting, searched by the twin under the user's goals.

A rule's formula gives one value (`--max-num-seqs 104`: the sequences the pool fits); the
seeds' tuning path is a search by hand around it (raise until preemption appears, step back
one). The twin fitted to the watched server can make that search before the first restart:
`search` runs the formula's configuration and a coarse-to-fine scan of the knobs the finding
touches (max_num_seqs with and without the FP8 KV cache it recommends, max_num_batched_tokens,
gpu_memory_utilization where the GPU has room) on the observed workload, and picks the
configuration with the most generated tokens/s that meets the `Goals`.

The twin may choose only where it can tell the candidates apart: a self-check withheld or of
low confidence, or a best candidate whose gain over the formula's is inside the twin's own
error on tokens/s, leaves the formula's value standing, marked "not checked by the twin", with
the reason (`Choice.note`). The rules' constraints hold in the search too: while the KV cache
is the wall, no candidate raises max_num_seqs above today's without FP8 KV to make the room.

Cost: each candidate is one twin run (about 0.1 s of CPU); `MAX_TRIALS` bounds a search to a
couple of seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from vtop import knobs
from vtop.figures import GENERATION, ITL_MEAN, PREEMPTIONS
from vtop.knobs import KV_WALL, KnobValue
from vtop.whatif.check import SelfCheck
from vtop.whatif.goals import SUSTAINED_PREEMPTION_PER_S, Goals
from vtop.whatif.predict import BAND_FLOOR, PINNED, Prediction, WhatIf

MAX_TRIALS = 16
"""Twin runs one search may make: the formula's, the coarse scans (`SEAT_POINTS` each), the
fine steps; at about 0.12 s of CPU each, about 2 s."""
SEAT_POINTS = 5
SEAT_RANGE = (0.25, 1.5)
"""The coarse scan of max_num_seqs: `SEAT_POINTS` values spaced evenly on a log scale from a
quarter of the smaller of the formula's value and today's batch to 1.5 times the larger."""
BUDGET_FACTORS = (0.5, 1.0, 2.0, 4.0)
"""The coarse scan of max_num_batched_tokens, as factors of today's budget."""
GPU_MEMORY_MAX = 0.95
"""The highest gpu_memory_utilization the search proposes (vLLM's own headroom advice)."""

Changes = dict[str, KnobValue]


@dataclass(frozen=True, slots=True)
class Trial:
    """One candidate configuration, what the twin predicts for it, and the goals it misses."""

    changes: Changes
    prediction: Prediction
    misses: tuple[str, ...]

    @property
    def tokens(self) -> float | None:
        band = self.prediction.figures.get("generation_tokens_per_s")
        return band.after if band is not None else None

    @property
    def meets(self) -> bool:
        return not self.misses

    def label(self) -> str:
        """`--kv-cache-dtype fp8 --max-num-seqs 96`: the flags, as a user types them."""
        return knobs.flags(self.changes, sep=" ")

    def line(self) -> str:
        """`--max-num-seqs 12: gen tok/s 408 (+11%), 1.8 preemptions/s`: the trade-off, against
        the twin at today's knobs, and the goals it misses."""
        figures = self.prediction.figures
        tokens = figures.get("generation_tokens_per_s")
        if tokens is None:
            return f"{self.label()}: {self.prediction.reason or 'not predicted'}"
        text = f"{self.label()}: {GENERATION.brief} {GENERATION.screen(tokens.after)}"
        if tokens.now > 0:
            text += f" ({(tokens.after - tokens.now) / tokens.now:+.0%})"
        preempt = figures.get("preemptions_per_s")
        if preempt is not None:
            stops = preempt.after <= SUSTAINED_PREEMPTION_PER_S
            said = f", {PREEMPTIONS.screen(preempt.after)} {PREEMPTIONS.brief}"
            text += ", no preemption" if stops else said
        itl = figures.get("itl_mean")
        if itl is not None and itl.now > 0 and abs(itl.after / itl.now - 1) >= 0.1:
            text += f", {ITL_MEAN.brief} {ITL_MEAN.screen(itl.after)}"
        other = [m for m in self.misses if PREEMPTIONS.brief not in m]
        return text + (f" (misses {', '.join(other)})" if other else "")


@dataclass(frozen=True, slots=True)
class Choice:
    """A search's outcome: the configuration to recommend, the trade-offs beside it."""

    goals: Goals
    formula: Trial
    chosen: Trial
    """The formula's own trial when the twin does not choose (`checked` false, or no gain)."""
    alternatives: tuple[Trial, ...]
    """Other configurations worth showing, most tokens first: trade-offs the goals refused
    (more tokens/s at some preemption), and the formula's when the twin chose another."""
    checked: bool
    """Whether the twin could judge the candidates (otherwise the formula's value stands)."""
    note: str
    """Why the formula's value stands, or how the choice was made, in one clause."""
    trials: tuple[Trial, ...]
    """Every configuration the twin ran, in the order it ran them (the formula's first)."""
    keeps_today: bool = False
    """The configuration chosen is the one the server runs: no change meets the goals better
    (the finding then recommends nothing; `alternatives` are the trade-offs the goals refused)."""
    cut_short: bool = False
    """The search stopped at its deadline: fewer configurations than usual were run."""

    @property
    def moved(self) -> bool:
        """Whether the twin chose another configuration than the formula's."""
        return self.chosen.changes != self.formula.changes

    def line(self) -> str:
        """How the configuration recommended was chosen, and under which goals."""
        if not self.checked:
            return self.note
        return f"{self.note}; goals: {self.goals.describe()}"


def search(
    whatif: WhatIf,
    formula: Mapping[str, KnobValue],
    goals: Goals,
    *,
    kv_wall: bool,
    gpu_room: bool = False,
    run: Callable[[Changes], Prediction] | None = None,
    deadline: float | None = None,
) -> Choice:
    """The best configuration among the formula's and the scan around it, under `goals`.

    `kv_wall`: the KV cache is the wall today (no raise of max_num_seqs without FP8 KV);
    `gpu_room`: the GPU has memory to spare (gpu_memory_utilization may rise). `run`: how a
    configuration is predicted (`whatif.predict`, unless a test says otherwise). `deadline`
    (`time.monotonic()`): none after the first runs past it (a report must stay on time)."""
    predict = run or whatif.predict
    base = dict(formula)
    tried: dict[tuple[tuple[str, str], ...], Trial] = {}
    cut = False

    def trial(changes: Changes) -> Trial | None:
        nonlocal cut
        key = tuple(sorted((k, str(v)) for k, v in changes.items()))
        if key in tried:
            return tried[key]
        cut = cut or bool(tried and deadline is not None and time.monotonic() > deadline)
        if len(tried) >= MAX_TRIALS or cut:
            return None
        try:
            prediction = predict(changes)
        except ValueError as exc:  # a configuration the twin cannot start
            prediction = Prediction(dict(changes), {}, {}, "withheld", str(exc))
        tried[key] = Trial(dict(changes), prediction, goals.misses(prediction))
        return tried[key]

    first = trial(base)
    assert first is not None  # the first of at most MAX_TRIALS
    check = whatif.check
    why = cannot_choose(check)
    if why:
        return Choice(goals, first, first, (), False, f"not checked by the twin: {why}", (first,))
    now = _today_of(whatif, base)
    if now is not None and first.prediction.figures:
        trial(now)  # no change is a candidate too: a raise must beat it, not a guess
    for changes in _coarse(whatif, base, kv_wall=kv_wall, gpu_room=gpu_room):
        if not _backwards(changes, base, now):
            trial(changes)
    best = best_of(tried.values())
    today = _today(whatif)
    while best is not None and len(tried) < MAX_TRIALS and not cut:
        steps = [
            changes
            for changes in _fine(best, tried.values(), kv_wall=kv_wall, today=today)
            if not _backwards(changes, base, now)
        ]
        if not steps:
            break
        for changes in steps:
            trial(changes)
        best = best_of(tried.values())
    resolution = max(BAND_FLOOR, check.errors.get("generation_tokens_per_s") or 0.0)
    note = f"the best of {len(tried)} configurations the twin ran"
    if best is first:
        note = f"the formula's value is the best of {len(tried)} configurations the twin ran"
    if best is None:
        best, note = first, f"none of {len(tried)} configurations meets the goals"
        if first.misses:
            note += f" (this one: {', '.join(first.misses)})"
    elif best is not first and first.meets and first.tokens and best.tokens is not None:
        gain = best.tokens / first.tokens - 1
        if gain < resolution:
            best = first
            note = (
                f"the formula's value: no other of {len(tried)} configurations gains more than "
                f"the twin's own error ({resolution:.0%} on {GENERATION.brief})"
            )
    trials = tuple(tried.values())
    keeps = best.meets and _is_today(whatif, best.changes)
    if keeps:
        note = (
            f"today's configuration: none of the {len(tried) - 1} others the twin ran "
            "meets the goals with more gen tok/s"
        )
    if cut:
        note += " (cut short by the report's time budget: the host gave vtop little CPU)"
    alternatives = _alternatives(best, first, trials)
    return Choice(goals, first, best, alternatives, True, note, trials, keeps, cut)


def _backwards(
    changes: Mapping[str, KnobValue],
    formula: Mapping[str, KnobValue],
    now: Mapping[str, KnobValue] | None,
) -> bool:
    """Whether `changes` moves a number the way opposite to the one the formula moves it from
    today's (a budget finding's search lowering max_num_seqs): such a candidate answers
    another finding than this one, whose words (the batch is at its cap) it would contradict.
    A formula that changes the KV cache's dtype makes room its own way: its search's numbers
    go either way (fewer seats without FP8 KV is a trade-off worth showing)."""
    dtype = formula.get("kv_cache_dtype")
    if now is None or (dtype is not None and dtype != now.get("kv_cache_dtype")):
        return False
    for name, target in formula.items():
        today, value = now.get(name), changes.get(name)
        if not (knobs.is_number(target) and knobs.is_number(today) and knobs.is_number(value)):
            continue
        if (target - today) * (value - today) < 0:
            return True
    return False


def _today_of(whatif: WhatIf, base: Mapping[str, KnobValue]) -> Changes | None:
    """The server's own values of the knobs `base` sets; None when one is not known."""
    now = {k: getattr(whatif.args, k, None) for k in base}
    if any(v is None for v in now.values()):
        return None
    return {k: v for k, v in now.items() if v is not None}


def _is_today(whatif: WhatIf, changes: Mapping[str, KnobValue]) -> bool:
    """Whether `changes` sets every knob to the value the server runs with."""
    args = whatif.args
    return bool(changes) and all(
        getattr(args, k, None) is not None
        and knobs.format_value(getattr(args, k)) == knobs.format_value(v)
        for k, v in changes.items()
    )


def cannot_choose(check: SelfCheck) -> str:
    """Why the twin may not choose among configurations (a self-check withheld, or of low
    confidence: a twin that far off cannot tell them apart); "" when it may."""
    if check.withheld or check.confidence == "low":
        return check.reason or "the self-check's confidence is low"
    return ""


def best_of(trials: Iterable[Trial]) -> Trial | None:
    """The trial with the most predicted tokens/s among those that meet the goals (the first
    of equals)."""
    scored = [(t.tokens, i, t) for i, t in enumerate(trials) if t.meets and t.tokens is not None]
    return max(scored, key=lambda s: (s[0], -s[1]))[2] if scored else None


def _alternatives(chosen: Trial, formula: Trial, trials: Iterable[Trial]) -> tuple[Trial, ...]:
    """What the user may prefer instead, most tokens first: the formula's (when not chosen),
    the best that meets the goals without one of the chosen knobs (no FP8 KV, say), and the
    trade-offs the goals refused that give more tokens/s (at some preemption)."""
    pool = [t for t in trials if t is not chosen and t.tokens is not None]
    wanted = [formula] if formula is not chosen and formula.tokens is not None else []
    for kind in dict.fromkeys(frozenset(t.changes) for t in pool):
        if kind != frozenset(chosen.changes):
            best = best_of(t for t in pool if frozenset(t.changes) == kind)
            wanted += [best] if best is not None and best not in wanted else []
    frontier = [t for t in pool if not any(_dominates(o, t) for o in pool if o is not t)]
    wanted += [
        t
        for t in sorted(frontier, key=lambda t: -(t.tokens or 0))[:1]
        if (t.tokens or 0) > (chosen.tokens or 0) and t not in wanted
    ]
    wanted.sort(key=lambda t: -(t.tokens or 0))
    return tuple(wanted[:3])


def _preemptions(t: Trial) -> float | None:
    band = t.prediction.figures.get("preemptions_per_s")
    return band.after if band is not None else None


def _dominates(a: Trial, b: Trial) -> bool:
    """Whether `a` has at least `b`'s tokens/s and at most its preemptions, and is not equal."""
    pa, pb = _preemptions(a), _preemptions(b)
    if a.tokens is None or b.tokens is None or pa is None or pb is None:
        return False
    return a.tokens >= b.tokens and pa <= pb and (a.tokens, pa) != (b.tokens, pb)


def _today(whatif: WhatIf) -> int:
    """Today's max_num_seqs: the server's, else vLLM's default for the fitted preset."""
    seats = whatif.args.max_num_seqs
    return seats if seats is not None else whatif.step.preset.scheduler_defaults.max_num_seqs


def _number(value: KnobValue) -> float:
    """A numeric knob's value (the knob catalog types it; a text here is a caller's bug)."""
    if not knobs.is_number(value):
        raise TypeError(f"expected a number, got {value!r}")
    return float(value)


def _log_grid(low: float, high: float, points: int) -> list[float]:
    """`points` values from `low` to `high`, evenly spaced on a log scale."""
    ratio = (high / low) ** (1 / (points - 1)) if high > low else 1.0
    return [low * ratio**i for i in range(points)]


def _seats(values: Iterable[float], cap: int | None) -> list[int]:
    out = sorted({max(1, round(v)) for v in values})
    return [v for v in out if cap is None or v <= cap]


def _coarse(whatif: WhatIf, base: Changes, *, kv_wall: bool, gpu_room: bool) -> list[Changes]:
    """The coarse scan around the formula's configuration, over the knobs it sets."""
    out: list[Changes] = []
    args = whatif.args
    fp8 = str(base.get("kv_cache_dtype", "")).startswith("fp8")
    if "max_num_seqs" in base or fp8:
        # an FP8 cache alone keeps today's seats: the room it makes may hold more, or fewer
        # may step faster, so its seats are scanned around today's
        seats = _number(base["max_num_seqs"]) if "max_num_seqs" in base else _today(whatif)
        anchors = [seats, float(whatif.check.observed.get("running") or 0)]
        values = _log_grid(
            min(a for a in anchors if a > 0) * SEAT_RANGE[0],
            max(anchors) * SEAT_RANGE[1],
            SEAT_POINTS,
        )
        if "max_num_seqs" in base:
            # without FP8, the pool as it is: twice a pinned pool's blocks is FP8's same memory
            plain = {k: v for k, v in base.items() if k not in ("kv_cache_dtype", PINNED)}
            plain_cap = _today(whatif) if kv_wall else None
            out += [{**plain, "max_num_seqs": v} for v in _seats(values, plain_cap)]
        if fp8:
            today = None if "max_num_seqs" in base else _today(whatif)  # that one is `base`
            out += [{**base, "max_num_seqs": v} for v in _seats(values, None) if v != today]
    if "max_num_batched_tokens" in base:
        today = args.max_num_batched_tokens or int(_number(base["max_num_batched_tokens"]))
        out += [
            {**base, "max_num_batched_tokens": max(256, round(today * f / 256) * 256)}
            for f in BUDGET_FACTORS
        ]
    if "gpu_memory_utilization" in base or (gpu_room and kv_wall):
        today_util = args.gpu_memory_utilization
        for util in (today_util + (GPU_MEMORY_MAX - today_util) / 2, GPU_MEMORY_MAX):
            if util > today_util:
                out.append({**base, "gpu_memory_utilization": round(util, 2)})
    return out


SCANNED = {"max_num_seqs": 1, "max_num_batched_tokens": 256}
"""The knobs the fine step refines, and the grain of their values."""


def _fine(best: Trial, trials: Iterable[Trial], *, kv_wall: bool, today: int) -> list[Changes]:
    """Halfway steps between the best and its nearest tried neighbours of the same kind (the
    same other knobs), on the first scanned knob it sets; none raises max_num_seqs above
    `today` without FP8 KV while the KV cache is the wall. Repeated on the new best, they
    bisect towards the edge where a goal starts to fail, until no step is left at the knob's
    grain (or the trials run out)."""
    knob = next((k for k in SCANNED if k in best.changes), None)
    if knob is None:
        return []
    grain = SCANNED[knob]
    value = int(_number(best.changes[knob]))
    same = {k: v for k, v in best.changes.items() if k != knob}
    tried = sorted(
        {
            int(_number(t.changes[knob]))
            for t in trials
            if knob in t.changes and {k: v for k, v in t.changes.items() if k != knob} == same
        }
    )
    i = tried.index(value)
    near = [
        n
        for n in (tried[i - 1] if i else None, tried[i + 1] if i + 1 < len(tried) else None)
        if n is not None
    ]
    fp8 = str(same.get("kv_cache_dtype", "")).startswith("fp8")
    cap = today if knob == "max_num_seqs" and kv_wall and not fp8 else None
    steps = {max(grain, round((value + n) / 2 / grain) * grain) for n in near}
    return [
        {**same, knob: v} for v in sorted(steps) if v not in tried and (cap is None or v <= cap)
    ]


def kv_is_wall(observed: Mapping[str, float | None], rule: str) -> bool:
    """Whether the KV cache is the wall today: the memory-ceiling finding, or usage at the
    wall (`vtop.knobs.KV_WALL`) with preemptions."""
    kv = observed.get("kv_usage") or 0.0
    preempting = (observed.get("preemptions_per_s") or 0.0) > SUSTAINED_PREEMPTION_PER_S
    return rule == "memory-ceiling" or (kv >= KV_WALL and preempting)
