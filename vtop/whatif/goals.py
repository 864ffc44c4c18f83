"""What "best" means when the twin chooses a setting: the goals, stated once.

By default the seeds' sweet spot: the most generated tokens/s with no sustained preemption and
the mean ITL no more than 1.5x today's; the user may bound TTFT p90 and the mean ITL and allow
preemption (on every mode, and in the config file). The twin's search judges its predictions by
them (`Goals.misses`, aiming a little inside each bound), `vtop tune` its measured trials
(`Goals.missed`, forgiving a measurement's noise), and every screen and report says which
goals were used (`Goals.describe`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from vtop.figures import GENERATION, ITL_MEAN, PREEMPTIONS, TTFT_P90, Figure
from vtop.whatif.predict import Prediction

SUSTAINED_PREEMPTION_PER_S = 0.05
"""Predicted preemptions/s above this (one each 20 s) count as sustained."""
ITL_GROWTH = 1.5
"""The sweet spot's default bound on the mean ITL: at most this many times today's.

ITL is judged by its mean (exact: the histogram's sum over its count), not by a p50 read off
vLLM's buckets, which are too coarse for it: with edges at 10, 25 and 50 ms, steps that grow
from 24 to 26 ms move an interpolated p50 from ~17 to ~37 ms, and a bound of 1.5x would stop
a search at a bucket's edge instead of at the latency the user allowed."""
AIM_INSIDE = 0.05
"""How far inside each latency bound the twin's choice stays: its predictions at a
configuration it has not seen are off by several percent (-8% on tokens/s and +6% on the
mean ITL at 2.4x the seats, measured on the simulator), and a choice on the bound's edge
would then miss it as often as not when `vtop tune` measures it."""


@dataclass(frozen=True, slots=True)
class Goals:
    """What "best" means: the most generated tokens/s that meets every bound.

    By default the seeds' sweet spot: no sustained preemption, the mean ITL no more than
    `itl_growth` times today's. `max_ttft_s` / `max_itl_s` bound TTFT p90 and the mean ITL;
    `allow_preemption` lifts the preemption bound."""

    max_ttft_s: float | None = None
    max_itl_s: float | None = None
    allow_preemption: bool = False
    itl_growth: float = ITL_GROWTH
    itl_anchor: str = ""
    """Where an ITL bound the user did not give came from (`anchored`), said beside it."""

    def anchored(self, itl_start_s: float | None) -> Goals:
        """These goals with the default ITL bound fixed at `itl_growth` times `itl_start_s`
        (a server's ITL before the first of several changes); unchanged when the user bounded
        ITL or it is not known."""
        if self.max_itl_s is not None or not itl_start_s:
            return self
        return replace(
            self,
            max_itl_s=self.itl_growth * itl_start_s,
            itl_anchor=f"{self.itl_growth:g}x the start's {ITL_MEAN.screen(itl_start_s)}",
        )

    def describe(self) -> str:
        """`most gen tok/s with no sustained preemption, ITL mean <= 1.5x today's`."""
        parts = [] if self.allow_preemption else ["no sustained preemption"]
        if self.max_itl_s is not None:
            anchor = f" ({self.itl_anchor})" if self.itl_anchor else ""
            parts.append(f"{ITL_MEAN.brief} <= {ITL_MEAN.screen(self.max_itl_s)}{anchor}")
        else:
            parts.append(f"{ITL_MEAN.brief} <= {self.itl_growth:g}x today's")
        if self.max_ttft_s is not None:
            parts.append(f"{TTFT_P90.brief} <= {TTFT_P90.screen(self.max_ttft_s)}")
        return f"most {GENERATION.brief} with " + ", ".join(parts)

    def misses(self, p: Prediction) -> tuple[str, ...]:
        """Each goal `p` misses, or cannot show it meets, in words; () when it meets them all.

        A bound the user gave needs its figure predicted; the default ITL bound is skipped
        when the twin withholds latency (it cannot judge it, and the user asked for nothing)."""
        f = p.figures

        def after(name: str) -> float | None:
            band = f.get(name)
            return band.after if band is not None else None

        itl = f.get("itl_mean")
        return self.missed(
            tokens=after("generation_tokens_per_s"),
            preemptions=after("preemptions_per_s"),
            itl=after("itl_mean"),
            itl_today=itl.now if itl is not None else None,
            ttft=after("ttft_p90"),
            unknown="not predicted",
            within=1 - AIM_INSIDE,
        )

    def missed(
        self,
        *,
        tokens: float | None,
        preemptions: float | None,
        itl: float | None,
        itl_today: float | None,
        ttft: float | None,
        unknown: str,
        within: float = 1.0,
    ) -> tuple[str, ...]:
        """The goals these figures miss (predicted, or measured by `vtop tune`), in words; a
        figure that is None cannot show a bound the user gave is met (`unknown` says why).
        Each latency bound is taken `within` times as large: under 1 to aim inside it, over 1
        to forgive a measurement's noise."""
        if tokens is None:
            return (f"{GENERATION.brief} {unknown}",)
        out: list[str] = []
        if not self.allow_preemption:
            if preemptions is None:
                out.append(f"preemptions {unknown}")
            elif preemptions > SUSTAINED_PREEMPTION_PER_S:
                out.append(f"{PREEMPTIONS.screen(preemptions)} {PREEMPTIONS.brief}")
        if self.max_itl_s is not None:
            out += _bounded(ITL_MEAN, itl, self.max_itl_s, within, unknown)
        elif itl is not None and itl_today and itl > self.itl_growth * within * itl_today > 0:
            ratio = itl / itl_today
            if ratio > self.itl_growth:
                out.append(f"{ITL_MEAN.brief} {ratio:.2g}x today's")
            else:
                out.append(f"{ITL_MEAN.brief} {ratio:.3g}x today's, too near {self.itl_growth:g}x")
        if self.max_ttft_s is not None:
            out += _bounded(TTFT_P90, ttft, self.max_ttft_s, within, unknown)
        return tuple(out)


def _bounded(
    figure: Figure, value: float | None, bound: float, within: float, unknown: str
) -> list[str]:
    """The miss of a bound the user gave (judged at `within` times it), or why it cannot be
    shown met; [] when `value` meets it."""
    if value is None:
        return [f"{figure.brief} {unknown}"]
    return [_over(figure, value, bound)] if value > bound * within else []


def _over(figure: Figure, value: float, bound: float) -> str:
    """`TTFT p90 3s > 2s`, or `... 1.95s, too near 2s` for a value over the bound aimed at
    but not over the bound itself."""
    said = f"{figure.brief} {figure.screen(value)}"
    if value > bound:
        return f"{said} > {figure.screen(bound)}"
    return f"{said}, too near {figure.screen(bound)}"
