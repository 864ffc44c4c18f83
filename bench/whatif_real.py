"""Do vtop's what-if predictions hold on the real vLLM CPU server? Predict, then restart the
server with the change and measure it.

Why: `vtop whatif` fits its scheduler twin to what it read of a server and self-checks it at
today's knobs; a self-check that passes only says the twin reproduces today. The claim worth
making is that the figures it predicts after a change are what the server then does. So, per
configuration:

1. Start the real server (tools/vllm_cpu, the `engine` model, the configuration of
   tests/integration/servers.py), put a fixed closed-loop load on it (fixed seed), wait
   `WARMUP_S`, watch it for `WATCH_S` with the monitor's live source and poll loop (exactly
   what `vtop whatif --url` does: `vtop.cli.whatif.watch_live`), stop it, and predict each
   changed `max_num_seqs` (`vtop.whatif.predict.prepare` + `WhatIf.predict`).
2. For each changed value: restart the server with it (~70 s), run the same load, wait
   `WARMUP_S` and watch it the same way for `WATCH_S`. The measurement is read from the
   server's own /metrics by the same path and the same `figures()` the prediction's self-check
   used, so predicted and measured are one kind of number.

Configurations: budget-bound (`BUDGET`: 4 seats, 160 KV blocks; 16 clients, prompts 16-64,
max_tokens 64-128, the shape of test_triage_real_server's budget test), predicted at
max_num_seqs 8, 12 and 16 (16 clients: more seats change nothing); KV-exhausted (`ENGINE_KV`:
16 seats, 24 blocks; 40 clients with kv_run's KV_HEAVY shape), predicted at max_num_seqs 8
and 4.

Printed: per configuration the self-check, then per change and figure the prediction (after,
its band), the measurement and the error: tokens/s, running and preemptions/s as a signed
relative error (measured at least the figure's floor of check.FLOORS), latencies as the
ratio predicted/measured (each at least its floor, 50 ms for queue and TTFT, so two tiny
queues read as 1x). At the end the worst tokens/s error and the worst queue p50 ratio against
the targets (+-25 % tokens/s; queue p50 within 10x either way). A figure the self-check
withheld prints "withheld: <reason>" and counts for no target; a target none of whose figures
was predicted is "unproven", not met. No constant is tuned here: this measures vtop as it is.

Only one vLLM server runs at a time (two on two cores measure each other): the bench waits
while another is running and watches while it measures (bench/_realserver.py). About 17
minutes with the defaults (seven starts of ~70 s, each loaded for 85 s).

    .venv/bin/python bench/whatif_real.py [--json PATH] [--budget-seqs 8,12,16] [--kv-seqs 8,4]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._realserver import measured_alone, start_alone, stop_on_sigterm
from tests.integration.kv_run import KV_HEAVY
from tests.integration.servers import BUDGET, ENGINE_KV, ServerConfig
from tools.vllm_cpu.load import LoadResult, Shape, closed_loop
from tools.vllm_cpu.server import VllmServer
from vtop import fmt
from vtop.cli.sources import SourceSpec
from vtop.cli.whatif import watch_live
from vtop.figures import FIGURE
from vtop.whatif.check import FLOORS, figures
from vtop.whatif.predict import Prediction, WhatIf, prepare
from vtop.whatif.watched import Watched

WARMUP_S = 15.0
WATCH_S = 60.0
INTERVAL_S = 1.0
LOAD_MARGIN_S = 10.0
"""Load runs past the watch by this much, so the last polls still see clients busy."""
TOKENS_TARGET = 0.25
QUEUE_TARGET = 10.0
SHOWN = (
    "generation_tokens_per_s",
    "queue_p50",
    "ttft_p90",
    "itl_p50",
    "running",
    "preemptions_per_s",
)
RATIO = frozenset({"queue_p50", "ttft_p90", "itl_p50"})
"""Judged as predicted/measured (latencies span orders of magnitude); the rest as relative."""


@dataclass(frozen=True, slots=True)
class Setup:
    name: str
    server: ServerConfig
    clients: int
    shape: Shape
    seed: int
    predict: tuple[int, ...]


@dataclass
class Row:
    """One figure of one changed configuration: predicted against measured."""

    config: str
    change: int
    figure: str
    after: float | None = None
    low: float | None = None
    high: float | None = None
    measured: float | None = None
    error: float | None = None
    """Signed relative error, or predicted/measured for a latency."""
    withheld: str = ""


@dataclass
class Outcome:
    setup: Setup
    whatif: WhatIf
    predictions: list[Prediction]
    measured: dict[int, dict[str, float | None]] = field(default_factory=dict)
    loads: dict[int, LoadResult] = field(default_factory=dict)


def setups(budget_seqs: Sequence[int], kv_seqs: Sequence[int]) -> list[Setup]:
    budget_shape = Shape(prompt_tokens=(16, 64), max_tokens=(64, 128))
    return [
        Setup("budget-bound", BUDGET, 16, budget_shape, 11, tuple(budget_seqs)),
        Setup("KV-exhausted", ENGINE_KV, 40, KV_HEAVY, 3, tuple(kv_seqs)),
    ]


def label(config: ServerConfig) -> str:
    return f"max_num_seqs={config.max_num_seqs} num_gpu_blocks={config.num_gpu_blocks}"


def start(config: ServerConfig, max_num_seqs: int) -> VllmServer:
    return start_alone(
        max_num_seqs=max_num_seqs,
        num_gpu_blocks=config.num_gpu_blocks,
        max_num_batched_tokens=config.max_num_batched_tokens,
        max_model_len=config.max_model_len,
        extra_args=tuple(config.extra_args),
    )


class Load:
    """The closed-loop load on a thread of its own (its own event loop), so the watch can run
    `watch_live` as `vtop whatif --url` does, on the main thread."""

    def __init__(self, url: str, setup: Setup, seconds: float) -> None:
        self.result: LoadResult | None = None
        self.error: BaseException | None = None
        self._run = partial(
            closed_loop,
            url,
            concurrency=setup.clients,
            duration=seconds,
            shape=setup.shape,
            seed=setup.seed,
            drain=False,
        )
        self._thread = threading.Thread(target=self._main, daemon=True)

    def _main(self) -> None:
        try:
            self.result = asyncio.run(self._run())
        except BaseException as exc:  # handed to the main thread by `join`
            self.error = exc

    def start(self) -> None:
        self._thread.start()

    def join(self) -> LoadResult:
        self._thread.join()
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


def loaded_watch(server: VllmServer, setup: Setup) -> tuple[Watched, LoadResult]:
    """The load, `WARMUP_S` of it, then `WATCH_S` watched with vtop's live source."""
    load = Load(server.url, setup, WARMUP_S + WATCH_S + LOAD_MARGIN_S)
    load.start()
    time.sleep(WARMUP_S)
    observed = watch_live(SourceSpec(urls=(server.url,), interval=INTERVAL_S), WATCH_S)
    return observed, load.join()


def watched(server: VllmServer, setup: Setup) -> tuple[Watched, LoadResult]:
    return measured_alone(server, partial(loaded_watch, server, setup))


def window(observed: Watched) -> float:
    times = observed.store.times()
    return min(WATCH_S, times[-1] - times[0])


def error(name: str, after: float | None, measured: float | None) -> float | None:
    if after is None or measured is None:
        return None
    floor = FLOORS[name]
    if name in RATIO:
        return max(after, floor) / max(measured, floor)
    return (after - measured) / max(abs(measured), floor)


def cell(name: str, value: float | None) -> str:
    if value is None:
        return fmt.DASH
    if name in RATIO:
        return fmt.seconds(value)
    return fmt.num(value)


def error_cell(name: str, value: float | None) -> str:
    if value is None:
        return fmt.DASH
    if name in RATIO:
        return f"{value:.2f}x"
    return f"{value:+.0%}"


def rows(outcome: Outcome) -> list[Row]:
    out = []
    for p in outcome.predictions:
        seqs = p.changes["max_num_seqs"]
        assert isinstance(seqs, int)
        measured = outcome.measured.get(seqs, {})
        for name in SHOWN:
            row = Row(outcome.setup.name, seqs, name, measured=measured.get(name))
            band = p.figures.get(name)
            if band is None:
                row.withheld = p.withheld.get(name) or p.reason or "the twin gave no figure"
            else:
                row.after, row.low, row.high = band.after, band.low, band.high
                row.error = error(name, band.after, row.measured)
            out.append(row)
    return out


def print_check(outcome: Outcome) -> None:
    check = outcome.whatif.check
    s = outcome.setup
    print(f"\n{s.name}: {label(s.server)}, {s.clients} clients, seed {s.seed}")
    off = check.errors.get("generation_tokens_per_s")
    print(f"  self-check: gen tok/s off by {fmt.pct(off)}, confidence {check.confidence}")
    if check.reason:
        print(f"    withheld: {check.reason}")
    for name in SHOWN:
        seen, twin = check.observed.get(name), check.twin.get(name)
        said = FIGURE[name].brief
        print(f"    {said:<14} observed {cell(name, seen):>9}  twin {cell(name, twin):>9}")
    for fam in check.families.values():
        if fam.withheld:
            print(f"    {fam.family} withheld: {fam.reason}")


def print_table(all_rows: list[Row]) -> None:
    head = ("configuration", "figure", "predicted (low–high)", "measured", "error", "in band")
    lines: list[tuple[str, ...]] = [head]
    notes: list[str] = []
    for r in all_rows:
        config = f"{r.config} -> max_num_seqs={r.change}"
        if r.withheld:
            said = FIGURE[r.figure].brief
            lines.append((config, said, "withheld", cell(r.figure, r.measured), "", ""))
            notes.append(f"  {config} {said} withheld: {r.withheld}")
            continue
        predicted = f"{cell(r.figure, r.after)} ({cell(r.figure, r.low)}–{cell(r.figure, r.high)})"
        inside = ""
        if r.measured is not None and r.low is not None and r.high is not None:
            inside = "yes" if r.low <= r.measured <= r.high else "no"
        lines.append(
            (
                config,
                FIGURE[r.figure].brief,
                predicted,
                cell(r.figure, r.measured),
                error_cell(r.figure, r.error),
                inside,
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    print()
    for line in lines:
        print("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())
    if notes:
        print()
        print("\n".join(notes))


def verdict(all_rows: list[Row]) -> dict[str, Any]:
    tokens = [
        abs(r.error)
        for r in all_rows
        if r.figure == "generation_tokens_per_s"
        if r.error is not None
    ]
    queues = [
        max(r.error, 1 / r.error)
        for r in all_rows
        if r.figure == "queue_p50"
        if r.error is not None and r.error > 0
    ]
    worst_tokens = max(tokens) if tokens else None
    worst_queue = max(queues) if queues else None

    def state(worst: float | None, target: float) -> str:
        if worst is None:
            return "unproven (every such prediction withheld)"
        return "met" if worst <= target else "missed"

    return {
        "worst_tokens_error": worst_tokens,
        "tokens_target": TOKENS_TARGET,
        "tokens": state(worst_tokens, TOKENS_TARGET),
        "worst_queue_factor": worst_queue,
        "queue_target": QUEUE_TARGET,
        "queue": state(worst_queue, QUEUE_TARGET),
    }


def run_setup(setup: Setup) -> Outcome:
    print(f"\n[{setup.name}] start at {label(setup.server)}", flush=True)
    server = start(setup.server, setup.server.max_num_seqs)
    try:
        observed, load = watched(server, setup)
    finally:
        server.stop()
    began = time.monotonic()
    whatif = prepare(observed, window(observed))
    predictions = [whatif.predict({"max_num_seqs": v}) for v in setup.predict]
    print(
        f"    (fit + {len(predictions)} prediction(s) in {time.monotonic() - began:.1f} s; "
        f"load {load.requests} requests, {load.errors} errors)",
        flush=True,
    )
    outcome = Outcome(setup, whatif, predictions)
    outcome.measured[setup.server.max_num_seqs] = figures(observed.store, window(observed))
    outcome.loads[setup.server.max_num_seqs] = load
    for seqs in setup.predict:
        print(f"[{setup.name}] restart at max_num_seqs={seqs}", flush=True)
        server = start(setup.server, seqs)
        try:
            measured, load = watched(server, setup)
        finally:
            server.stop()
        outcome.measured[seqs] = figures(measured.store, window(measured))
        outcome.loads[seqs] = load
        got = outcome.measured[seqs]["generation_tokens_per_s"]
        print(
            f"    measured {fmt.num(got)} tok/s; load {load.requests} requests, "
            f"{load.errors} errors",
            flush=True,
        )
    return outcome


def document(outcomes: list[Outcome], all_rows: list[Row], summary: dict[str, Any]) -> Any:
    return {
        "date": datetime.date.today().isoformat(),
        "warmup_s": WARMUP_S,
        "watch_s": WATCH_S,
        "configurations": [
            {
                "name": o.setup.name,
                "server": {
                    "max_num_seqs": o.setup.server.max_num_seqs,
                    "num_gpu_blocks": o.setup.server.num_gpu_blocks,
                    "max_model_len": o.setup.server.max_model_len,
                },
                "load": {
                    "clients": o.setup.clients,
                    "prompt_tokens": o.setup.shape.prompt_tokens,
                    "max_tokens": o.setup.shape.max_tokens,
                    "seed": o.setup.seed,
                },
                "self_check": {
                    "observed": o.whatif.check.observed,
                    "twin": o.whatif.check.twin,
                    "confidence": o.whatif.check.confidence,
                    "reason": o.whatif.check.reason or None,
                    "withheld": o.whatif.check.withheld_figures(),
                },
                "measured": {str(k): v for k, v in o.measured.items()},
                "loads": {str(k): v.summary() for k, v in o.loads.items()},
            }
            for o in outcomes
        ],
        "rows": [
            {
                "configuration": r.config,
                "max_num_seqs": r.change,
                "figure": r.figure,
                "predicted": None
                if r.withheld
                else {"after": r.after, "low": r.low, "high": r.high},
                "measured": r.measured,
                "error": r.error,
                "error_kind": "ratio" if r.figure in RATIO else "relative",
                "withheld": r.withheld or None,
            }
            for r in all_rows
        ],
        "summary": summary,
    }


def seqs_list(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(",") if v.strip())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON here")
    parser.add_argument("--budget-seqs", type=seqs_list, default=(8, 12, 16), metavar="N,N")
    parser.add_argument("--kv-seqs", type=seqs_list, default=(8, 4), metavar="N,N")
    opts = parser.parse_args()
    stop_on_sigterm()
    began = time.monotonic()
    outcomes = [run_setup(s) for s in setups(opts.budget_seqs, opts.kv_seqs) if s.predict]
    all_rows = [r for o in outcomes for r in rows(o)]
    for o in outcomes:
        print_check(o)
    print_table(all_rows)
    summary = verdict(all_rows)
    worst_t, worst_q = summary["worst_tokens_error"], summary["worst_queue_factor"]
    print(
        f"\nworst tokens/s error: {fmt.DASH if worst_t is None else f'{worst_t:.0%}'} "
        f"(target ±{TOKENS_TARGET:.0%}): {summary['tokens']}"
    )
    print(
        f"worst queue p50 ratio: {fmt.DASH if worst_q is None else f'{worst_q:.2f}x'} "
        f"(target within {QUEUE_TARGET:g}x): {summary['queue']}"
    )
    print(f"({time.monotonic() - began:.0f} s, vLLM CPU build, {datetime.date.today()})")
    if opts.json:
        Path(opts.json).write_text(json.dumps(document(outcomes, all_rows, summary), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
