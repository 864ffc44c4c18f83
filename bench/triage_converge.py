"""Does vtop's advice converge? On the simulator: follow it from a bad configuration, restart
after each change, and compare the result with the best a sweep of the knob finds.

For each scenario whose cause is a knob (budget-too-small, past-sweet-spot,
prefill-budget-bound, memory-ceiling), the twin runs 8 virtual minutes per configuration; the
firing findings' recommendations are applied (as a user would pass the flags to `vllm serve`)
and the server restarted, at most three times. Throughput is generated tokens/s over the last
three minutes, with preemptions/s beside it (the seed's sweet spot: the most throughput with
no preemption). The real-server version of this bench needs tools/vllm_cpu.

    .venv/bin/python bench/triage_converge.py [SCENARIO…]
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.sim.helpers import with_knobs
from vtop.knobs import KnobValue
from vtop.model import Finding, Frame, Knob
from vtop.monitor import Monitor
from vtop.signals.extract import PageReader
from vtop.sim.scenarios import SCENARIOS, Scenario
from vtop.sim.serve_args import ServeArgs
from vtop.sim.twin import Twin
from vtop.sources import discovery
from vtop.triage.engine import Engine

EP = "http://127.0.0.1:8000"
RUN_S = 480.0
SWEEPS = {
    "budget-too-small": ("max_num_seqs", [16, 32, 48, 64, 96, 128, 256]),
    "past-sweet-spot": ("max_num_seqs", [64, 80, 96, 104, 112, 128]),
    "prefill-budget-bound": ("max_num_batched_tokens", [512, 1024, 2048, 4096, 8192, 16384]),
    "memory-ceiling": ("max_num_seqs", [16, 24, 32, 48, 64, 256]),
}
SERVE_KNOBS = {f.name for f in dataclasses.fields(ServeArgs)}


@dataclasses.dataclass
class Result:
    args: ServeArgs
    tokens_per_s: float
    preempt_per_s: float
    findings: list[Finding]


def run(scenario: Scenario, args: ServeArgs, rules: Engine) -> Result:
    twin = Twin(dataclasses.replace(scenario, args=args), seed=0)
    reader = PageReader()
    monitor = Monitor(engine=rules)
    cache: dict[str, str] = {}
    while twin.now < RUN_S:
        twin.advance(1.0)
        delay, page = twin.scrape()
        scrape = reader.read(page.decode(), endpoint=EP, t=twin.now, latency_s=delay,
                             size_bytes=len(page))  # fmt: skip
        if scrape.info and scrape.info != cache:
            cache = dict(scrape.info)
            process = {k: Knob(k, v, "process", "sim command line") for k, v in twin.knobs.items()}
            knobs = discovery.merge(cache_info=cache, endpoint=twin.endpoint_info(),
                                    process=process)  # fmt: skip
            scrape = dataclasses.replace(scrape, knobs=knobs, server=twin.endpoint_info())
        monitor.feed(Frame(twin.now, (scrape,), gpu=twin.gpu_status()))
    view = monitor.endpoints[EP]
    tps = view.store.rate("generation_tokens", 180.0) or 0.0
    pps = view.store.rate("preemptions", 180.0) or 0.0
    return Result(args, tps, pps, [f for f in view.findings if f.state == "firing"])


def apply(args: ServeArgs, findings: list[Finding]) -> tuple[ServeArgs, list[str]]:
    changes: dict[str, KnobValue] = {}
    flags = []
    for f in findings:
        for rec in f.recommendations:
            if rec.knob in SERVE_KNOBS and rec.knob not in changes:
                changes[rec.knob] = rec.new_value
                flags.append(rec.flag)
    return with_knobs(args, changes), flags


def show(label: str, r: Result) -> None:
    fired = ", ".join(f.rule for f in r.findings) or "nothing fires"
    print(f"  {label:<34} {r.tokens_per_s:8.0f} tok/s {r.preempt_per_s:6.2f} preempt/s   {fired}")


def main(names: list[str]) -> None:
    engine_rules = list(Engine.from_catalog(user=False).rules)
    for name in names or list(SWEEPS):
        scenario = SCENARIOS[name]
        knob, values = SWEEPS[name]
        print(f"{name}: start {knob}={getattr(scenario.args, knob)}")
        args = scenario.args
        restarts = 0
        final = run(scenario, args, Engine(engine_rules))
        show(f"start: {knob}={getattr(args, knob)}", final)
        while restarts < 3:
            args, flags = apply(args, final.findings)
            if not flags:
                break
            restarts += 1
            print(f"    apply {' '.join(flags)}")
            final = run(scenario, args, Engine(engine_rules))
            show(f"restart {restarts}: {knob}={getattr(args, knob)}", final)
        sweep = [(v, run(scenario, with_knobs(scenario.args, {knob: v}),
                         Engine(engine_rules))) for v in values]  # fmt: skip
        for v, r in sweep:
            show(f"sweep {knob}={v}", r)
        best = max(r.tokens_per_s for _, r in sweep)
        calm = max((r.tokens_per_s for _, r in sweep if r.preempt_per_s < 0.01), default=0.0)
        print(f"  => {restarts} restart(s): {final.tokens_per_s:.0f} tok/s at "
              f"{final.preempt_per_s:.2f} preempt/s = {final.tokens_per_s / best:.0%} of the "
              f"sweep's best ({best:.0f}), {final.tokens_per_s / calm:.0%} of its best without "
              f"preemption ({calm:.0f})\n")  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
