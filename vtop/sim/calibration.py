"""The step-time law fitted to measured steps: least squares, kept to costs that are not negative.

The twin's presets for GPUs are rooflines; a server the twin is fitted to (the real vLLM CPU
server the `cpu-engine` preset describes, or any server `vtop whatif` watches,
`vtop.whatif.fit`) is described instead by a `FittedStepTime`: a fixed cost per step, a cost per
scheduled token, an extra cost per scheduled request (what a decode token costs beyond a prefill
token: sampling, per-request bookkeeping) and a cost per context token read by attention.

- A roofline does not describe a 2-core CPU: there is no separate memory-bound decode and
  compute-bound prefill regime worth modelling, and Python overhead per step is large; a
  linear law does, and a GPU's measured steps fit it as well. Except at the smallest steps:
  on the CPU build a step of one to about five tokens costs the same (17-20 ms, the 4-seat
  step as fast as the 2-seat one on three days of measurements), then each token costs its
  share. A line through all of them is too steep at the bottom and too flat above it, so a
  twin anchored at 2 seats under-promised a raise to 8 by 40-60 points of throughput and
  stopped short of the best setting; `fit_step_time(points, floor_tokens)` fits the floor and
  the line apart.
- The fit is ordinary least squares on *relative* errors (a 1 s prefill step must not drown a
  20 ms decode step), with coefficients kept non-negative (a negative cost is a fit artefact,
  not a property of the engine). Only the standard library: it runs on a dozen points.

The points the `cpu-engine` preset was fitted to, the real server's configurations and the
sampling of both sides are bench and test tools (`tests/simtools/realcpu.py`), not shipped.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from vtop.sim.hardware import FittedStepTime


@dataclass(frozen=True, slots=True)
class StepPoint:
    """One measured operating point of the real engine: an average step.

    `tokens` and `seqs` are scheduled tokens and requests per step, `context` the KV tokens
    attention reads per step, `step_s` the measured seconds per step.
    """

    label: str
    tokens: float
    seqs: float
    context: float
    step_s: float


# --- the fit ----------------------------------------------------------------------------------


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """Gaussian elimination with partial pivoting; a singular column gets 0."""
    n = len(b)
    m = [[*row, b[i]] for i, row in enumerate(a)]
    for col in range(n):
        piv = max(range(col, n), key=lambda r: abs(m[r][col]))
        if abs(m[piv][col]) < 1e-300:
            continue
        m[col], m[piv] = m[piv], m[col]
        for r in range(n):
            if r != col and m[r][col] != 0.0:
                f = m[r][col] / m[col][col]
                for c in range(col, n + 1):
                    m[r][c] -= f * m[col][c]
    return [m[i][n] / m[i][i] if abs(m[i][i]) >= 1e-300 else 0.0 for i in range(n)]


def _features(p: StepPoint) -> list[float]:
    return [1.0, p.tokens, p.seqs, p.context]


def fit_step_time(
    points: tuple[StepPoint, ...] | list[StepPoint], floor_tokens: float = 0.0
) -> FittedStepTime:
    """Least squares on relative error of step = base + a*tokens + b*seqs + c*context, with
    every coefficient >= 0 (a coefficient that comes out negative is dropped and the rest
    refitted).

    With `floor_tokens`, the points of at most that many tokens a step set a floor (their
    mean step) and the line is fitted to the others: a law flat for the smallest steps, then
    linear (`FittedStepTime.kernel_floor_s`)."""
    small = [p for p in points if p.tokens <= floor_tokens]
    wide = [p for p in points if p.tokens > floor_tokens]
    if small and wide:
        line = fit_step_time(wide)
        floor = sum(p.step_s for p in small) / len(small)
        return replace(line, base_s=0.0, kernel_base_s=line.base_s, kernel_floor_s=floor)
    if not points:
        raise ValueError("no measured points to fit")
    active = [0, 1, 2, 3]
    coef = [0.0] * 4
    while active:
        ata = [[0.0] * len(active) for _ in active]
        atb = [0.0] * len(active)
        for p in points:
            x = _features(p)
            w = 1.0 / (p.step_s * p.step_s)
            for i, fi in enumerate(active):
                atb[i] += w * x[fi] * p.step_s
                for j, fj in enumerate(active):
                    ata[i][j] += w * x[fi] * x[fj]
        sol = _solve(ata, atb)
        worst = min(range(len(active)), key=lambda i: sol[i])
        if sol[worst] < 0:
            active.pop(worst)
            continue
        coef = [0.0] * 4
        for i, fi in enumerate(active):
            coef[fi] = sol[i]
        break
    return FittedStepTime(
        base_s=coef[0], per_token_s=coef[1], per_seq_s=coef[2], per_context_token_s=coef[3]
    )


def predict(fit: FittedStepTime, p: StepPoint) -> float:
    """The step time `fit` gives the point's step (what the twin's StepCost computes)."""
    return fit.base_s + fit.kernel_s(p.tokens, p.seqs, p.context)
