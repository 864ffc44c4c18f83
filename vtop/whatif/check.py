"""The self-check: the twin at today's knobs against what the server showed, figure by figure.

A prediction is only worth showing if the twin reproduces today, so `vtop.whatif.predict`
runs it at today's knobs and asks `check` whether it does:

- Both sides are read the same way: the twin's /metrics pages go through vtop's own parser
  into a `Store`, and `figures` computes every figure of both stores with the catalog's
  `vtop.figures.window_figures`, which every view's figures come from, so what is compared is
  like with like.
- The error of a figure is |twin - observed| / max(|observed|, its floor) (the floors keep
  "0.1 vs 0.3 requests waiting" from reading as a 200 % miss). Above `MAX_TOKENS_ERROR` on
  generated tokens/s the twin does not describe this server and every prediction is withheld
  with that reason; no observed token rate withholds as well. Below it, the confidence is the
  worst of what each family allows: tokens/s "high" (<= 10 %), "medium" (<= 20 %) or "low";
  occupancy "high" within half its limit, latency within `HIGH_LATENCY_FACTOR`, "medium"
  within the limit, "low" past it (their figures then withheld). One confident figure beside
  a twin that misses the queue 14x is no high confidence.
- A twin can get the token rate right and the rest wrong (a queue of 243 ms against 20 s
  observed: a different load, the same throughput), so each family of `FAMILIES` is judged on
  its own and a family that is off has its figures withheld with its reason, while the others
  are still predicted. Throughput (generated tokens/s) is the gate above. Occupancy (running,
  waiting, KV usage; preemptions/s follow it) is off above `MAX_OCCUPANCY_ERROR` relative
  error on any of them. Latency (queue p50, TTFT p50/p90, ITL mean; queue p90 and ITL p50
  follow) spans orders of magnitude, so it is judged as a ratio: the larger of twin and
  observed over the smaller (each at least its floor); above `MAX_LATENCY_FACTOR` on any of
  them it is off. A family the server shows none of is not judged. The inter-token latency is
  judged by its mean (the histogram's sum over its count), not its median: decode steps are
  nearly all alike, so a median falls wherever vLLM's buckets (10, 25, 50 ms) put it, and a
  real 2-seat server stepping 10.3 ms read an ITL p50 of 8.8 ms beside its twin's 17.5 ms (a
  mean of 10.2): "2x off", confidence low, and the twin kept from choosing.
- A request's queue time is recorded as it finishes, so a window shorter than the requests'
  end-to-end latency reads the queue times of requests that queued before it: the first
  requests of a load, admitted at once, read 0.2 s beside 30 requests waiting at every poll
  (the real KV-exhausted server 45 s into its load; its twin's steady 58 s was right). The
  server says so itself: by Little's law the mean number waiting is the seconds of queueing a
  second, which the window's queue times should add up to (`queue_unjudged`). Where the two
  are more than `QUEUE_APART` apart, the queue figures are not judged (nor their error given):
  they describe another time than the window.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Literal

from vtop import durations
from vtop.figures import ENDPOINT, FIGURE, Scope, window_figures
from vtop.signals.queueing import queue_seen
from vtop.signals.store import Store

MAX_TOKENS_ERROR = 0.30
"""Above this self-check error on generated tokens/s, predictions are withheld."""
MAX_OCCUPANCY_ERROR = 0.50
"""Above this relative error on running, waiting or KV usage, occupancy is withheld."""
MAX_LATENCY_FACTOR = 2.0
"""Above this ratio (twin/observed or its inverse) on a latency figure, latency is withheld."""
HIGH_LATENCY_FACTOR = 1.25
"""Within this ratio on every latency figure, latency allows "high" confidence; past it, at most
"medium". Half the limit (1.5x) let the float32 API-bound server's report say "confidence
high" beside a twin whose TTFT p90 was 1.49x off: no user reads a latency half again as long
as a confident one."""

QUEUE_APART = 2.0
"""The waiting gauge's queue and the one the window's queue times add up to, further apart than
this factor (either way): the queue figures are not judged (see the module's docstring)."""
QUEUE_FIGURES = ("queue_p50", "queue_p90")

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
    "itl_mean",
)
"""What the self-check compares and a prediction states, by their names in `vtop.figures`
(which also says what each is called and how it is printed)."""

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
    "itl_mean": 0.002,
}
"""Each figure's floor: an error is relative to the observed value or this, whichever is larger."""


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
    Family(
        "latency", ("queue_p50", "ttft_p50", "ttft_p90", "itl_mean"), ("queue_p90", "itl_p50"), True
    ),
)
"""Every figure of `FIGURES` in exactly one family."""


def figures(
    store: Store, window_s: float | None, scope: Scope = ENDPOINT
) -> dict[str, float | None]:
    """Every figure of `FIGURES` over the window, as every view computes it (the catalog's
    `window_figures`); None where the server shows nothing. The twin's pages are read by the
    same function."""
    every = window_figures(store, window_s, scope)
    return {name: every[name] for name in FIGURES}


def queue_unjudged(store: Store, window_s: float | None, scope: Scope = ENDPOINT) -> str:
    """Why the window's queue times do not describe its queue, in a clause ("" where they do,
    or where neither side saw a request-second of queueing a second): the mean number waiting
    against the queue seconds of the requests that finished, per second of the window
    (`vtop.signals.queueing`)."""
    seen = queue_seen(store, window_s, scope.key("waiting"), scope.key("queue_time"))
    if seen is None or max(seen.waiting, seen.recorded) < 1:
        return ""
    ratio = seen.ratio  # None: nothing recorded beside a gauge of at least one waiting
    if ratio is not None and 1 / QUEUE_APART <= ratio <= QUEUE_APART:
        return ""
    return (
        f"queue time not judged: {seen.waiting:.3g} requests waited on average over the "
        f"window, {seen.recorded:.3g} by the queue times of the {seen.finished:.0f} requests "
        f"that finished in its {durations.span(seen.seconds)} (they queued before it)"
    )


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
    family: Family,
    observed: Mapping[str, float | None],
    twin: Mapping[str, float | None],
    unjudged: Collection[str] = (),
) -> FamilyCheck:
    """The family's worst judged figure (none of `unjudged`) and, past its limit, why its
    figures are withheld."""
    measure = latency_factor if family.ratio else relative_error
    scored = [
        (error, name)
        for name in family.judged
        if name not in unjudged
        and (error := measure(name, twin.get(name), observed.get(name))) is not None
    ]
    if not scored:
        return FamilyCheck(family.name, None, None)
    error, worst = max(scored)
    seen, got = observed.get(worst), twin.get(worst)
    fig = FIGURE[worst]
    label = fig.brief
    reason = ""
    if family.ratio and error > MAX_LATENCY_FACTOR:
        reason = (
            f"the twin's {label} is {error:.3g}x off today's ({fig.screen(got)} against "
            f"{fig.screen(seen)} observed; more than {MAX_LATENCY_FACTOR:g}x): "
            f"its {family.name} does not describe this server"
        )
    elif not family.ratio and family.name != "throughput" and error > MAX_OCCUPANCY_ERROR:
        reason = (
            f"the twin's {label} misses today's by {_past(error, MAX_OCCUPANCY_ERROR)} "
            f"({fig.screen(got)} against "
            f"{fig.screen(seen)} observed; more than {MAX_OCCUPANCY_ERROR:.0%}): "
            f"its {family.name} does not describe this server"
        )
    return FamilyCheck(family.name, worst, error, reason)


def _past(error: float, limit: float) -> str:
    """A share past a limit, with the digits that show it is past: `31%`, and `30.4%` where a
    whole percent would read as the limit itself ("by 30% (more than 30%)")."""
    for digits in range(4):
        said = f"{error:.{digits}%}"
        if float(said.rstrip("%")) / 100 > limit:
            return said
    return said


def check(
    observed: Mapping[str, float | None],
    twin: Mapping[str, float | None],
    unjudged: Collection[str] = (),
) -> SelfCheck:
    """The errors, the confidence they give and, above `MAX_TOKENS_ERROR`, why withheld; each
    family's verdict beside them. `unjudged`: observed figures that describe another time than
    the window (`queue_unjudged`): no error is given for them and no family judged on them."""
    errors = {
        n: None if n in unjudged else relative_error(n, twin.get(n), observed.get(n))
        for n in FIGURES
    }
    families = {f.name: judge(f, observed, twin, unjudged) for f in FAMILIES}
    tokens = errors["generation_tokens_per_s"]
    seen = observed.get("generation_tokens_per_s")
    reason = ""
    confidence: Confidence
    if tokens is None or not seen:
        confidence, reason = "withheld", "no generated tokens observed to check the twin against"
    elif tokens > MAX_TOKENS_ERROR:
        confidence = "withheld"
        reason = (
            f"the twin misses today's generated tokens/s by {_past(tokens, MAX_TOKENS_ERROR)} "
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
    figures withheld) leaves at most "low", one within its limit but past half of it (latency:
    past `HIGH_LATENCY_FACTOR`) "medium". A twin that gets the token rate right and the queue
    14x wrong does not describe the server, whatever its tokens/s; a family the server shows
    none of says nothing."""
    if verdict.error is None:
        return "high"
    if verdict.withheld:
        return "low"
    if verdict.family == "latency":
        return _grade(verdict.error, HIGH_LATENCY_FACTOR, MAX_LATENCY_FACTOR)
    return _grade(verdict.error, MAX_OCCUPANCY_ERROR / 2, MAX_OCCUPANCY_ERROR)
