"""Calibrate the twin against the real vLLM CPU server, and show both side by side.

Two commands, both driving the real server of tools/vllm_cpu (`engine` model) and reading it
the way vtop does, through its /metrics page once a second:

- `fit` measures the engine's step time at several operating points on one server
  (max_num_seqs 16, 24 blocks): pure decode with 1-16 clients (step time = mean inter-token
  latency), decode over long contexts, and saturated prefill (step time = seconds per engine
  step while requests wait). It prints the points, the step-time law fitted to them and to
  bench/tune_real.py's sweep points (`realcpu.SWEPT`) by `vtop.sim.calibration.fit_step_time`
  (flat up to `realcpu.FLOOR_TOKENS` tokens a step, linear above), and the `CALIBRATED` tuple
  to paste into tests/simtools/realcpu.py beside the `cpu-engine` preset's constants in
  hardware.py.
- `compare` (the default) runs the three configurations of `realcpu.CONFIGS` --
  KV-exhausted, budget-bound, light -- on the real server and on the twin with the same
  arguments and load, and prints running, waiting, KV usage, preemptions/s and generated
  tokens/s side by side, which wall binds in each, and whether throughput agrees within 2x.
  `--twin-only` prints the twin's side without starting vLLM.

The twin is read through its own /metrics page with the same reader, and both are measured
over the same window after the same warm-up, so the comparison is page against page. Each
real configuration loads the server for `--seconds` (default 75) after a 15 s warm-up.
It never runs beside another vLLM server (two on two cores would measure each other): see
bench/_realserver.py.

    .venv/bin/python bench/calibrate.py fit
    .venv/bin/python bench/calibrate.py [compare] [--twin-only] [--seconds S]

Outputs recorded on 2026-11-30 (fit and comparison): docs/calibration.md.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from bench._realserver import measured_alone, start_alone, stop_on_sigterm
from tests.simtools.realcpu import (
    CONFIGS,
    FLOOR_TOKENS,
    MEASURED,
    SWEPT,
    Figures,
    RealConfig,
    read_page,
    real_twin,
    sample_server,
    sample_twin,
)
from tools.vllm_cpu.load import LoadResult, closed_loop
from tools.vllm_cpu.load import Shape as LoadShape
from tools.vllm_cpu.server import VllmServer
from vtop.sim.calibration import StepPoint, fit_step_time, predict
from vtop.sim.hardware import CPU_ENGINE
from vtop.sim.twin import Twin

WARMUP_S = 15.0


# --- the real server ----------------------------------------------------------------------------


async def wait_idle(url: str, http: httpx.AsyncClient, timeout: float = 120.0) -> None:
    """Until the server holds no request (cancelled requests are aborted asynchronously)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        page = read_page((await http.get(f"{url}/metrics")).text)
        if page.get("running", 0.0) == 0 and page.get("waiting", 0.0) == 0:
            return
        await asyncio.sleep(1.0)


async def measure_real(
    url: str,
    *,
    clients: int,
    prompt: tuple[int, int],
    output: tuple[int, int],
    seconds: float,
    warmup_s: float = WARMUP_S,
    seed: int = 1,
) -> tuple[Figures, LoadResult]:
    """Closed-loop load for warm-up + `seconds`; /metrics sampled once a second after warm-up;
    then wait until the server has let go of the cancelled requests."""
    shape = LoadShape(prompt_tokens=prompt, max_tokens=output)
    load = closed_loop(
        url,
        concurrency=clients,
        duration=warmup_s + seconds + 2.0,
        shape=shape,
        seed=seed,
        drain=False,
    )
    fig, result = await sample_server(url, load, seconds, warmup_s)
    assert isinstance(result, LoadResult)
    async with httpx.AsyncClient(timeout=30.0, trust_env=False) as http:
        await wait_idle(url, http)
    return fig, result


def start(max_num_seqs: int, num_gpu_blocks: int) -> VllmServer:
    print(f"  starting vLLM: max_num_seqs {max_num_seqs}, {num_gpu_blocks} blocks", flush=True)
    return start_alone(max_num_seqs=max_num_seqs, num_gpu_blocks=num_gpu_blocks)


def measure(server: VllmServer, **kw: Any) -> tuple[Figures, LoadResult]:
    """`measure_real` on `server`, repeated if another vLLM server ran meanwhile."""
    return measured_alone(server, lambda: asyncio.run(measure_real(server.url, **kw)))


# --- the twin -----------------------------------------------------------------------------------


def measure_twin(twin: Twin, seconds: float, warmup_s: float = WARMUP_S) -> Figures:
    return sample_twin(twin, seconds, warmup_s)


# --- fit ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FitPoint:
    label: str
    kind: str  # "decode": step = inter-token latency; "prefill": step = s / engine step
    clients: int
    prompt: tuple[int, int]
    output: tuple[int, int]


FIT_POINTS = (
    FitPoint("decode x1", "decode", 1, (8, 16), (64, 110)),
    FitPoint("decode x2", "decode", 2, (8, 16), (64, 110)),
    FitPoint("decode x4", "decode", 4, (8, 16), (64, 110)),
    FitPoint("decode x8", "decode", 8, (8, 16), (64, 110)),
    FitPoint("decode x12", "decode", 12, (8, 16), (64, 110)),
    FitPoint("decode x16", "decode", 16, (8, 16), (64, 110)),
    # 4 x ~560-token contexts: 5 blocks each, 20 of the 24
    FitPoint("decode x4, long context", "decode", 4, (448, 512), (64, 100)),
    # prompts of 256-384 with max_tokens 1: ~8 fit in the pool, the budget (2048) fills
    FitPoint("prefill", "prefill", 12, (256, 384), (1, 1)),
)
FIT_SERVER = (16, 24)


def mid(r: tuple[int, int]) -> float:
    return (r[0] + r[1]) / 2


def to_point(fp: FitPoint, f: Figures) -> StepPoint:
    if fp.kind == "decode":
        seqs = f.running
        return StepPoint(
            fp.label, f.tokens_per_step, seqs, seqs * (mid(fp.prompt) + mid(fp.output) / 2), f.itl_s
        )
    seqs = max(1.0, f.tokens_per_step / mid(fp.prompt))
    return StepPoint(fp.label, f.tokens_per_step, seqs, f.tokens_per_step, 1.0 / f.steps_per_s)


def fit_command(seconds: float) -> None:
    print(
        f"Fitting the step time of the real engine model (max_num_seqs {FIT_SERVER[0]}, "
        f"{FIT_SERVER[1]} blocks, {seconds:.0f} s per point)\n"
    )
    server = start(*FIT_SERVER)
    points: list[StepPoint] = []
    try:
        for fp in FIT_POINTS:
            f, res = measure(
                server, clients=fp.clients, prompt=fp.prompt, output=fp.output, seconds=seconds
            )
            p = to_point(fp, f)
            points.append(p)
            print(
                f"  {fp.label:<26} running {f.running:5.1f} waiting {f.waiting:5.1f} "
                f"KV {f.kv:4.2f} steps/s {f.steps_per_s:6.1f} tok/step {f.tokens_per_step:7.1f} "
                f"ITL {f.itl_s * 1000:6.1f} ms  busy {f.steps_per_s * p.step_s:4.0%}  "
                f"gen {f.generation_tps:5.0f} tok/s  errors {res.errors}",
                flush=True,
            )
    finally:
        server.stop()
    fit = fit_step_time([*points, *SWEPT], FLOOR_TOKENS)
    print(
        f"\nfit: step = at least {fit.kernel_floor_s * 1000:.2f} ms (up to {FLOOR_TOKENS:g} "
        f"tokens), else {(fit.base_s + fit.kernel_base_s) * 1000:.2f} ms + "
        f"{fit.per_token_s * 1000:.3f} ms/token + {fit.per_seq_s * 1000:.3f} ms/request + "
        f"{fit.per_context_token_s * 1e6:.3f} us/context token"
    )
    print(f"  {'point':<26} {'tokens':>7} {'seqs':>6} {'context':>8} {'real ms':>8} {'fit ms':>8}")
    for p in points:
        print(
            f"  {p.label:<26} {p.tokens:7.1f} {p.seqs:6.2f} {p.context:8.0f} "
            f"{p.step_s * 1000:8.1f} {predict(fit, p) * 1000:8.1f}"
        )
    print("\nCALIBRATED = (")
    for p in points:
        print(
            f"    StepPoint({p.label!r}, {p.tokens:.2f}, {p.seqs:.2f}, {p.context:.0f}, "
            f"{p.step_s:.5f}),"
        )
    print(")")
    print(
        f"fitted=FittedStepTime(base_s={fit.base_s:.5f}, per_token_s={fit.per_token_s:.6f}, "
        f"per_seq_s={fit.per_seq_s:.6f}, per_context_token_s={fit.per_context_token_s:.3e}, "
        f"kernel_base_s={fit.kernel_base_s:.6f}, kernel_floor_s={fit.kernel_floor_s:.6f})"
    )
    print("(fitted with realcpu.SWEPT too: paste the points above as CALIBRATED)")


# --- compare ------------------------------------------------------------------------------------


def row(side: str, f: Figures, cfg: RealConfig) -> str:
    wall = f.wall(cfg.max_num_seqs)
    return (
        f"  {side:<5} {f.running:7.1f} {f.running_max:5.0f} {f.waiting:8.1f} {f.kv:6.2f} "
        f"{f.preemptions_per_s:10.2f} {f.generation_tps:10.0f} {f.tokens_per_step:9.1f} "
        f"{f.itl_s * 1000:7.1f}  {wall}"
    )


def groups(configs: Iterable[RealConfig]) -> dict[tuple[int, int], list[RealConfig]]:
    """Configurations that share a server (same seats and pool), in the order given."""
    out: dict[tuple[int, int], list[RealConfig]] = {}
    for c in configs:
        out.setdefault((c.max_num_seqs, c.num_gpu_blocks), []).append(c)
    return out


def compare_command(seconds: float, twin_only: bool) -> int:
    print(
        f"Real vLLM CPU server vs the twin (preset {CPU_ENGINE.name}; {seconds:.0f} s after a "
        f"{WARMUP_S:.0f} s warm-up, /metrics at 1 Hz)\n"
    )
    real: dict[str, Figures] = {}
    if not twin_only:
        # light before kv-exhausted: a KV-exhausted run leaves preempted work to drain
        order = sorted(CONFIGS, key=lambda c: c.clients)
        for (seqs, blocks), cfgs in groups(order).items():
            server = start(seqs, blocks)
            try:
                for c in cfgs:
                    f, res = measure(
                        server,
                        clients=c.clients,
                        prompt=c.prompt,
                        output=c.output,
                        seconds=seconds,
                    )
                    real[c.name] = f
                    print(
                        f"  measured {c.name}: {res.requests} requests done, {res.errors} errors",
                        flush=True,
                    )
            finally:
                server.stop()
        print()
    ok = True
    head = (
        f"  {'':<5} {'running':>7} {'max':>5} {'waiting':>8} {'KV':>6} {'preempt/s':>10} "
        f"{'gen tok/s':>10} {'tok/step':>9} {'ITL ms':>7}  wall"
    )
    for c in CONFIGS:
        twin = real_twin(
            max_num_seqs=c.max_num_seqs,
            num_gpu_blocks=c.num_gpu_blocks,
            clients=c.clients,
            prompt=c.prompt,
            output=c.output,
        )
        t = measure_twin(twin, seconds)
        print(
            f"{c.name}: max_num_seqs {c.max_num_seqs}, {c.num_gpu_blocks} blocks of 128, "
            f"{c.clients} clients, prompts {c.prompt[0]}-{c.prompt[1]}, max_tokens "
            f"{c.output[0]}-{c.output[1]}; expected wall: {c.wall}"
        )
        print(head)
        if c.name in real:
            print(row("real", real[c.name], c))
        print(row("twin", t, c))
        if c.name in real:
            r = real[c.name]
            walls = [r.wall(c.max_num_seqs), t.wall(c.max_num_seqs)]
            ratio = t.generation_tps / r.generation_tps if r.generation_tps else float("inf")
            same = walls[0] == walls[1] == c.wall
            within = 0.5 <= ratio <= 2.0
            ok = ok and same and within
            print(
                f"  => wall: real {walls[0]}, twin {walls[1]} "
                f"({'same' if walls[0] == walls[1] else 'DIFFERENT'}); throughput twin/real "
                f"{ratio:.2f} ({'within' if within else 'NOT within'} 2x)"
            )
        print()
    if real:
        print("calibration:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", nargs="?", choices=("compare", "fit"), default="compare")
    parser.add_argument(
        "--seconds",
        type=float,
        default=None,
        help="measured seconds per configuration (compare 75, fit 25)",
    )
    parser.add_argument("--twin-only", action="store_true", help="compare: skip the real server")
    opts = parser.parse_args()
    stop_on_sigterm()
    if opts.command == "fit":
        fit_command(opts.seconds or 25.0)
        return 0
    if MEASURED:
        fit = CPU_ENGINE.fitted
        assert fit is not None
        worst = max(abs(predict(fit, p) / p.step_s - 1) for p in MEASURED)
        print(
            f"(preset fitted to {len(MEASURED)} measured points; worst step-time error {worst:.0%})"
        )
    return compare_command(opts.seconds or 75.0, opts.twin_only)


if __name__ == "__main__":
    sys.exit(main())
