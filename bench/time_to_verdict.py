"""How soon does vtop name the right root cause, and does anything else fire on the way?

For every simulator scenario, vtop attaches to a twin that has been in its scenario for five
simulated minutes ("warmed": the incident is under way when the user opens vtop) and to one
just started, and polls it the way the live screen and `--report` do: the same `Monitor`, the
same rules, the same warm-up (four polls a second for the first 15 s where the server answers
fast, `vtop.sources.pacing`). It prints the seconds from the first poll to the scenario's rule
firing with its recommendation, and every other warning that fired before or with it (there
must be none). Targets on the warmed twins, from issue 16: 15 s for memory-ceiling,
past-sweet-spot, budget-too-small, prefill-budget-bound and frontend-bound; 45 s for
client-static-batching, long-prompt-starvation and ttft-queueing.

Then the false-alarm sweep: the scenarios whose rule is not a warning (healthy, and the
information-only underloaded and prefix-cache-ineffective) run 30 simulated minutes at every
poll interval from 0.25 to 10 s, attached warm and cold; any warning that fires is a failure.

With `--matrix`, last, what a short report says at every length from 5 to 45 s and every
poll interval from 0.25 to 10 s (`bench/report_matrix.py`: never OK while sick, never a wrong
root cause).

Exit 1 when a target is missed, a false alarm fires or a matrix cell is wrong.

    .venv/bin/python bench/time_to_verdict.py [--quick] [--matrix] [SCENARIO…]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vtop.model import Finding, Severity
from vtop.monitor import Monitor
from vtop.sim.scenarios import SCENARIOS, Scenario
from vtop.sources.pacing import Pacer
from vtop.sources.sim import SimSource
from vtop.triage.engine import Engine

WARMED_S = 300.0
EPOCH = 1_700_000_000.0
TARGETS = {
    "memory-ceiling": 15.0,
    "past-sweet-spot": 15.0,
    "budget-too-small": 15.0,
    "prefill-budget-bound": 15.0,
    "frontend-bound": 15.0,
    "client-static-batching": 45.0,
    "long-prompt-starvation": 45.0,
    "ttft-queueing": 45.0,
}
LIMIT_S = 600.0
"""How long a run waits for its verdict before it gives up."""
SWEEP_S = 1800.0
INTERVALS = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0)
ENGINE_RULES = list(Engine.from_catalog(user=False).rules)


@dataclass
class Run:
    verdict_s: float | None = None
    flags: list[str] = field(default_factory=list)
    others: dict[str, float] = field(default_factory=dict)
    """Every other rule that fired at warning or above, with when it first did."""


def attach(scenario: Scenario, warm_s: float, interval_s: float, seed: int = 0) -> SimSource:
    source = SimSource.scenario(scenario.name, seed=seed, epoch=EPOCH, warm_up=False,
                                interval_s=interval_s, in_thread=False)  # fmt: skip
    source.twins[0].advance(warm_s)
    return source


def watch(source: SimSource, rule: str | None, limit_s: float, interval_s: float) -> Run:
    """Poll as the product does until `rule` fires with its advice (or `limit_s` passes)."""
    monitor = Monitor(engine=Engine(ENGINE_RULES))
    pacer = Pacer(interval_s)
    run = Run()
    start: float | None = None
    while True:
        frame = source.poll_now()
        monitor.feed(frame)
        start = frame.t if start is None else start
        elapsed = frame.t - start
        findings: list[Finding] = next(iter(monitor.endpoints.values())).findings
        for f in findings:
            if f.state != "firing" or f.severity < Severity.WARNING:
                continue
            if f.rule == rule:
                if run.verdict_s is None:
                    run.verdict_s = elapsed
                    run.flags = [r.flag for r in f.recommendations]
            else:
                run.others.setdefault(f.rule, elapsed)
        if (run.verdict_s is not None and rule is not None) or elapsed >= limit_s:
            return run
        source.pace(pacer.next_after(frame))


def verdicts(names: list[str]) -> bool:
    ok = True
    print(f"{'scenario':26s} {'warmed 5 min':>14s} {'target':>8s} {'just started':>14s}  "
          "advice (warmed); other warnings")  # fmt: skip
    for name in names:
        sc = SCENARIOS[name]
        if sc.rule is None or name not in TARGETS:
            continue
        warm = watch(attach(sc, WARMED_S, 1.0), sc.rule, LIMIT_S, 1.0)
        cold = watch(attach(sc, 0.0, 1.0), sc.rule, LIMIT_S, 1.0)
        target = TARGETS[name]
        hit = warm.verdict_s is not None and warm.verdict_s <= target
        clean = not warm.others and not cold.others
        ok = ok and hit and clean
        others = {**{f"{k} (warmed)": v for k, v in warm.others.items()},
                  **{f"{k} (started)": v for k, v in cold.others.items()}}  # fmt: skip
        also = ", ".join(f"{k} at {v:.0f} s" for k, v in others.items())
        print(f"{name:26s} {_s(warm.verdict_s):>14s} {target:>7.0f}s {_s(cold.verdict_s):>14s}  "
              f"{' '.join(warm.flags) or '(no flag change)'}{'; ' + also if also else ''}"
              f"{'' if hit else '  MISSED'}{'' if clean else '  OTHER WARNINGS'}")  # fmt: skip
    return ok


def sweep(names: list[str], seconds: float, intervals: tuple[float, ...]) -> bool:
    ok = True
    quiet = [n for n in names if (rule := SCENARIOS[n].rule) is None or _info(rule)]
    print(
        f"\nno warning over {seconds / 60:.0f} simulated minutes, attached warmed / just "
        "started, at each poll interval:"
    )
    for name in quiet:
        row = []
        for interval in intervals:
            fired: dict[str, float] = {}
            for warm_s in (WARMED_S, 0.0):
                run = watch(attach(SCENARIOS[name], warm_s, interval), None, seconds, interval)
                fired.update(run.others)
            ok = ok and not fired
            row.append(f"{interval:g} s " + ("ok" if not fired else ",".join(sorted(fired))))
        print(f"  {name:26s} " + " | ".join(row))
    return ok


def _info(rule: str) -> bool:
    return next(r for r in ENGINE_RULES if r.id == rule).severity < Severity.WARNING


def _s(value: float | None) -> str:
    return "never" if value is None else f"{value:.1f} s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("scenarios", nargs="*", help="default: every scenario")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="the false-alarm sweep over 5 minutes at 0.25, 1 and 10 s only",
    )
    parser.add_argument(
        "--matrix",
        action="store_true",
        help="then every report length and poll interval (bench/report_matrix.py)",
    )
    args = parser.parse_args(argv)
    names = args.scenarios or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario {unknown[0]!r}; known: {', '.join(SCENARIOS)}")
    ok = verdicts(names)
    if args.quick:
        ok = sweep(names, 300.0, (0.25, 1.0, 10.0)) and ok
    else:
        ok = sweep(names, SWEEP_S, INTERVALS) and ok
    if args.matrix:
        from bench import report_matrix

        print()
        ok = report_matrix.main(names) == 0 and ok
    print("\nall targets met, no false alarm" if ok else "\nFAILED: see MISSED / a rule name above")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
