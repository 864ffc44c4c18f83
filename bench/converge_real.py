"""Does vtop's advice converge on the real vLLM CPU server? Follow it from a badly budgeted
configuration, restarting the server with each recommended value, and compare where it ends
with the best throughput a sweep of the knob finds under the same load.

The real-server twin of bench/triage_converge.py. The server is tools/vllm_cpu's `engine`
model with 160 KV blocks (20,480 tokens: room for ~80 of this load's requests) started at
`--max-num-seqs 4`, far below what the pool holds, under 32 closed-loop clients (prompts
16-64 tokens, max_tokens 64-128) -- more demand than seats.

Path: vtop watches the server as a user would run it on the same host (the live source polls
/metrics at 1 Hz and reads the vLLM process's command line for its knobs; the shipped catalog
evaluates every poll through `Monitor`). As soon as a firing finding has carried a
recommendation for a knob the server takes (`max_num_seqs`, `max_num_batched_tokens`) for 10
consecutive polls, that value is applied by restarting the server with it; when no such advice
appears within `--watch` seconds (default 300; the rules want 2-3 minutes of history before
they speak), the path has converged. At most three restarts. Advice for other knobs is printed,
not applied.

Sweep: the same load on `--max-num-seqs` 4, 8, 16, 32, 64 (a 20 s warm-up, then 75 s).
Throughput everywhere is generated tokens/s from the server's own counter over the 75 s before
the measurement ends (on the path, as vtop's store computes the rate; in the sweep, from the
same counter read once a second); preemptions/s beside it.

Only one vLLM server runs at a time (two on two cores would measure each other): the bench
waits while another one is running, measures again when one ran meanwhile
(bench/_realserver.py), and stops its own when done.

`--twin` runs the same path and sweep on the twin (preset cpu-engine, virtual time, seconds):
what the calibrated twin predicts the real server will do.

    .venv/bin/python bench/converge_real.py [--watch S] [--no-sweep] [--twin]

Output recorded on 2026-11-30 (path, sweep and the twin's prediction): docs/calibration.md.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from bench._realserver import measured_alone, start_alone, stop_on_sigterm
from tests.simtools.realcpu import real_twin, sample_twin
from tools.vllm_cpu.load import LoadResult, Shape, closed_loop
from tools.vllm_cpu.server import VllmServer
from vtop.model import Finding, Frame, Knob
from vtop.monitor import Monitor
from vtop.signals.extract import PageReader
from vtop.signals.parser import iter_samples
from vtop.sources import discovery
from vtop.sources.live import LiveSource
from vtop.sources.local import LocalHost
from vtop.sources.vllm import ScrapeOptions
from vtop.triage.engine import Engine

T = TypeVar("T")
BLOCKS = 160
START_SEQS = 4
CLIENTS = 32
PROMPT = (16, 64)
OUTPUT = (64, 128)
SHAPE = Shape(prompt_tokens=PROMPT, max_tokens=OUTPUT)
SWEEP = (4, 8, 16, 32, 64)
APPLICABLE = ("max_num_seqs", "max_num_batched_tokens")
SETTLE_POLLS = 10
WINDOW_S = 75.0
SWEEP_WARMUP_S = 20.0
MAX_RESTARTS = 3


@dataclass
class Knobs:
    max_num_seqs: int
    max_num_batched_tokens: int | None = None

    def label(self) -> str:
        s = f"max_num_seqs={self.max_num_seqs}"
        if self.max_num_batched_tokens is not None:
            s += f" max_num_batched_tokens={self.max_num_batched_tokens}"
        return s


@dataclass
class Run:
    knobs: Knobs
    tokens_per_s: float
    preempt_per_s: float
    watched_s: float = 0.0
    fired: list[str] = field(default_factory=list)
    advice: dict[str, int] = field(default_factory=dict)
    other_advice: list[str] = field(default_factory=list)
    summary: str = ""


def start(knobs: Knobs) -> VllmServer:
    return start_alone(
        max_num_seqs=knobs.max_num_seqs,
        num_gpu_blocks=BLOCKS,
        max_num_batched_tokens=knobs.max_num_batched_tokens,
    )


def counters(text: str) -> tuple[float, float]:
    gen = pre = 0.0
    for name, _, value in iter_samples(text):
        if name == "vllm:generation_tokens_total":
            gen += value
        elif name == "vllm:num_preemptions_total":
            pre += value
    return gen, pre


class Meter:
    """Counter readings at 1 Hz; rates over the last WINDOW_S seconds."""

    def __init__(self) -> None:
        self.points: list[tuple[float, float, float]] = []

    def add(self, t: float, text: str) -> None:
        self.points.append((t, *counters(text)))

    def rates(self) -> tuple[float, float]:
        t1, g1, p1 = self.points[-1]
        first = next(p for p in self.points if p[0] >= t1 - WINDOW_S)
        t0, g0, p0 = first
        dt = t1 - t0
        return ((g1 - g0) / dt, (p1 - p0) / dt) if dt > 0 else (0.0, 0.0)


async def stop_load(load: asyncio.Task[LoadResult]) -> None:
    """Cancel the load and its client tasks (closed_loop's workers outlive a cancelled
    closed_loop and would fail noisily on its closed HTTP client), and collect them."""
    load.cancel()
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for t in others:
        t.cancel()
    await asyncio.gather(*others, return_exceptions=True)


def applicable(findings: list[Finding]) -> tuple[dict[str, int], list[str], list[str]]:
    """(applicable knob -> value, other advice as flags, firing rule ids)."""
    advice: dict[str, int] = {}
    other: list[str] = []
    fired: list[str] = []
    for f in findings:
        if f.state != "firing":
            continue
        fired.append(f.rule)
        for rec in f.recommendations:
            if rec.knob in APPLICABLE and isinstance(rec.new_value, int) and rec.knob not in advice:
                advice[rec.knob] = rec.new_value
            elif rec.knob not in APPLICABLE:
                other.append(rec.flag)
    return advice, other, fired


async def watch(server: VllmServer, knobs: Knobs, max_s: float) -> Run:
    """Load the server while vtop watches it; stop when advice has settled or at `max_s`."""
    local = LocalHost()
    source = LiveSource(
        [server.url], ScrapeOptions.from_env(interval_s=1.0), process_probe=local.process_knobs
    )
    monitor = Monitor(engine=Engine(Engine.from_catalog(user=False).rules))
    load = asyncio.create_task(
        closed_loop(
            server.url, concurrency=CLIENTS, duration=max_s + 30, shape=SHAPE, seed=7, drain=False
        )
    )
    began = time.monotonic()
    settled = 0
    last: tuple[str, ...] = ()
    findings: list[Finding] = []
    try:
        async with source:
            while time.monotonic() - began < max_s:
                tick = time.monotonic()
                monitor.feed(await source.poll())
                findings = list(next(iter(monitor.endpoints.values())).findings)
                advice, _, _ = applicable(findings)
                key = tuple(sorted(f"{k}={v}" for k, v in advice.items()))
                settled = settled + 1 if advice and key == last else (1 if advice else 0)
                last = key
                if settled >= SETTLE_POLLS:
                    break
                await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
    finally:
        await stop_load(load)
        local.close()
    store = next(iter(monitor.endpoints.values())).store
    tps = store.rate("generation_tokens", WINDOW_S) or 0.0
    pps = store.rate("preemptions", WINDOW_S) or 0.0
    advice, other, fired = applicable(findings)
    firing = [f for f in findings if f.state == "firing"]
    return Run(
        knobs,
        tps,
        pps,
        time.monotonic() - began,
        fired,
        advice,
        other,
        firing[0].summary if firing else "",
    )


async def measure(server: VllmServer) -> tuple[float, float]:
    """Sweep point: warm-up, then generated tokens/s and preemptions/s over WINDOW_S."""
    meter = Meter()
    load = asyncio.create_task(
        closed_loop(
            server.url,
            concurrency=CLIENTS,
            duration=SWEEP_WARMUP_S + WINDOW_S + 30,
            shape=SHAPE,
            seed=7,
            drain=False,
        )
    )
    try:
        async with httpx.AsyncClient(timeout=30.0, trust_env=False) as http:
            await asyncio.sleep(SWEEP_WARMUP_S)
            end = time.monotonic() + WINDOW_S
            while True:
                tick = time.monotonic()
                meter.add(tick, (await http.get(f"{server.url}/metrics")).text)
                if tick >= end:
                    break
                await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
    finally:
        await stop_load(load)
    return meter.rates()


def run_async(fn: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T:
    return asyncio.run(fn(*args))


def twin_run(knobs: Knobs, seconds: float) -> Run:
    """The same configuration and load on the twin (preset cpu-engine), watched by the same
    catalog through the twin's page, with the knobs a process probe would find."""
    twin = real_twin(
        max_num_seqs=knobs.max_num_seqs,
        num_gpu_blocks=BLOCKS,
        clients=CLIENTS,
        prompt=PROMPT,
        output=OUTPUT,
        max_num_batched_tokens=knobs.max_num_batched_tokens,
    )
    reader = PageReader()
    monitor = Monitor(engine=Engine(Engine.from_catalog(user=False).rules))
    process = {k: Knob(k, v, "process", "twin command line") for k, v in twin.knobs.items()}
    ep = "http://127.0.0.1:8000"
    findings: list[Finding] = []
    settled = 0
    last: tuple[str, ...] = ()
    while twin.now < seconds:
        twin.advance(1.0)
        page = twin.metrics_text().decode()
        scrape = reader.read(page, endpoint=ep, t=twin.now, latency_s=0.01)
        knobs_seen = discovery.merge(
            cache_info=dict(scrape.info), endpoint=twin.endpoint_info(), process=process
        )
        scrape = replace(scrape, knobs=knobs_seen, server=twin.endpoint_info())
        monitor.feed(Frame(twin.now, (scrape,)))
        findings = list(monitor.endpoints[ep].findings)
        advice, _, _ = applicable(findings)
        key = tuple(sorted(f"{k}={v}" for k, v in advice.items()))
        settled = settled + 1 if advice and key == last else (1 if advice else 0)
        last = key
        if settled >= SETTLE_POLLS:
            break
    store = monitor.endpoints[ep].store
    advice, other, fired = applicable(findings)
    firing = [f for f in findings if f.state == "firing"]
    return Run(
        knobs,
        store.rate("generation_tokens", WINDOW_S) or 0.0,
        store.rate("preemptions", WINDOW_S) or 0.0,
        twin.now,
        fired,
        advice,
        other,
        firing[0].summary if firing else "",
    )


def show(label: str, r: Run) -> None:
    fired = ", ".join(r.fired) or "no finding fires"
    print(
        f"  {label:<32} {r.tokens_per_s:7.0f} tok/s {r.preempt_per_s:5.2f} preempt/s  "
        f"watched {r.watched_s:4.0f} s  {fired}",
        flush=True,
    )
    if r.summary:
        print(f"      {r.summary}")
    if r.other_advice:
        print(f"      advice not applied (not a knob of this bench): {' '.join(r.other_advice)}")


def real_run(knobs: Knobs, watch_s: float) -> Run:
    server = start(knobs)
    try:
        return measured_alone(server, partial(run_async, watch, server, knobs, watch_s))
    finally:
        server.stop()


def real_sweep_point(seqs: int) -> tuple[float, float]:
    server = start(Knobs(seqs))
    try:
        return measured_alone(server, partial(run_async, measure, server))
    finally:
        server.stop()


def twin_sweep_point(seqs: int) -> tuple[float, float]:
    twin = real_twin(
        max_num_seqs=seqs,
        num_gpu_blocks=BLOCKS,
        clients=CLIENTS,
        prompt=PROMPT,
        output=OUTPUT,
    )
    f = sample_twin(twin, WINDOW_S, SWEEP_WARMUP_S)
    return f.generation_tps, f.preemptions_per_s


def path(watch_s: float, on_twin: bool) -> tuple[list[Run], int]:
    knobs = Knobs(START_SEQS)
    runs: list[Run] = []
    restarts = 0
    while True:
        run = twin_run(knobs, watch_s) if on_twin else real_run(knobs, watch_s)
        runs.append(run)
        label = "start" if restarts == 0 else f"restart {restarts}"
        show(f"{label}: {knobs.label()}", run)
        if not run.advice or restarts >= MAX_RESTARTS:
            return runs, restarts
        knobs = Knobs(
            run.advice.get("max_num_seqs", knobs.max_num_seqs),
            run.advice.get("max_num_batched_tokens", knobs.max_num_batched_tokens),
        )
        flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in run.advice.items())
        print(f"    apply {flags}", flush=True)
        restarts += 1


def sweep(on_twin: bool) -> list[tuple[int, float, float]]:
    out = []
    for seqs in SWEEP:
        tps, pps = twin_sweep_point(seqs) if on_twin else real_sweep_point(seqs)
        out.append((seqs, tps, pps))
        print(f"  sweep max_num_seqs={seqs:<3} {tps:7.0f} tok/s {pps:5.2f} preempt/s", flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--watch", type=float, default=300.0, help="most seconds per path step")
    parser.add_argument("--no-sweep", action="store_true")
    parser.add_argument(
        "--twin",
        action="store_true",
        help="the same path and sweep on the twin (preset cpu-engine), no vLLM",
    )
    opts = parser.parse_args()
    stop_on_sigterm()
    print(
        f"Real vLLM CPU server (engine model), {BLOCKS} KV blocks of 128; load: {CLIENTS} "
        f"closed-loop clients, prompts {SHAPE.prompt_tokens}, max_tokens {SHAPE.max_tokens}; "
        f"start --max-num-seqs {START_SEQS}\n"
    )
    began = time.monotonic()
    if opts.twin:
        print("ON THE TWIN (preset cpu-engine), virtual time\n")
    runs, restarts = path(opts.watch, opts.twin)
    if opts.no_sweep:
        return 0
    points = sweep(opts.twin)
    best_seqs, best, _ = max(points, key=lambda p: p[1])
    final = runs[-1]
    share = final.tokens_per_s / best if best else 0.0
    converged = not final.advice
    print(f"\n  {'path':<40} {'sweep':<30}")
    for i in range(max(len(runs), len(points))):
        left = ""
        if i < len(runs):
            r = runs[i]
            left = f"{r.knobs.label():<26} {r.tokens_per_s:6.0f} tok/s"
        right = ""
        if i < len(points):
            s, tps, pps = points[i]
            right = f"max_num_seqs={s:<3} {tps:6.0f} tok/s {pps:4.2f} preempt/s"
        print(f"  {left:<40} {right}")
    ok = converged and share >= 0.9 and restarts <= MAX_RESTARTS
    print(
        f"\n  => {restarts} restart(s), {'no tuning advice left' if converged else 'advice left'}"
        f": {final.tokens_per_s:.0f} tok/s = {share:.0%} of the sweep's best ({best:.0f} at "
        f"max_num_seqs={best_seqs}); >= 90% within 3 restarts: {'YES' if ok else 'NO'}"
    )
    print(f"  ({(time.monotonic() - began) / 60:.0f} min)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
