"""What a short report says on every simulator scenario, at every length and poll interval.

Issue 25: a report is judged by a user after a minute at most, and one confident falsehood
costs more than a slow truth. For every scenario this runs `vtop --demo SCENARIO --report
--duration D --interval I` as the command line does (the twin five minutes into its incident,
the same warm-up pacing, the same collector), for D in 5, 10, 15, 30 and 45 s and I from 0.25
to 10 s, and prints one cell per run:

    V   the scenario's rule is the verdict (WARNING or CRITICAL, first in the report)
    u   UNKNOWN with the scenario's rule still being judged, named first
    ?   UNKNOWN naming another rule, or no rule (not false, but not the nearest cause)
    -   OK on a scenario whose rule is not a warning (healthy, info-only)
    X   a wrong root cause: another rule is the verdict
    !   OK on a sick scenario: a false all-clear

Exit 1 if any cell is X or !.

    .venv/bin/python bench/report_matrix.py [SCENARIO…] [--durations 5,10] [--intervals 1]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vtop.model import Severity
from vtop.report.collect import Collector
from vtop.report.run import simulated_document
from vtop.sim.scenarios import SCENARIOS
from vtop.sources.sim import DEMO_RUNNING_S, SimSource
from vtop.triage.engine import Engine

DURATIONS = (5.0, 10.0, 15.0, 30.0, 45.0)
INTERVALS = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0)
ENGINE = Engine.from_catalog(user=False)

# The verdicts are the question here, not what their advice will buy: the twin's predictions
# (seconds a report) are left out, which changes no status, reason or finding.
Collector._predictions = lambda self, ranked: ({}, None)  # type: ignore[method-assign]


def sick(scenario: str) -> str | None:
    """The rule a scenario must be named by, when it is a warning or worse."""
    rule = SCENARIOS[scenario].rule
    if rule is None or ENGINE.by_id[rule].severity < Severity.WARNING:
        return None
    return rule


def cell(scenario: str, duration: float, interval: float) -> tuple[str, str]:
    source = SimSource.scenario(
        scenario, seed=0, interval_s=interval, speed=1.0, running_s=DEMO_RUNNING_S
    )
    doc = simulated_document(
        source, name=scenario, duration_s=duration, engine=Engine(ENGINE.rules)
    )
    want = sick(scenario)
    counted = [f for f in doc["findings"] if f["counts"] and f["severity"] != "INFO"]
    if doc["status"] in ("WARNING", "CRITICAL"):
        top = counted[0]["rule"] if counted else "?"
        return ("V" if top == want else "X"), f"{doc['status']} {top}"
    if doc["status"] == "UNKNOWN":
        judging = [
            f["rule"]
            for f in doc["findings"]
            if f["state"] in ("pending", "insufficient") and f["severity"] != "INFO"
        ]
        first = judging[0] if judging else None
        return ("u" if first is not None and first == want else "?"), doc["reason"][:90]
    return ("!" if want is not None else "-"), doc["reason"][:90]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("scenarios", nargs="*", help="default: every scenario")
    parser.add_argument("--durations", default=",".join(f"{d:g}" for d in DURATIONS))
    parser.add_argument("--intervals", default=",".join(f"{i:g}" for i in INTERVALS))
    parser.add_argument("-v", "--verbose", action="store_true", help="print each cell's reason")
    args = parser.parse_args(argv)
    names = args.scenarios or list(SCENARIOS)
    durs = [float(x) for x in args.durations.split(",")]
    ivals = [float(x) for x in args.intervals.split(",")]
    head = " ".join(f"{f'{d:g}s@{i:g}':>8}" for d in durs for i in ivals)
    print(f"{'scenario':24} {head}")
    bad = []
    for name in names:
        marks = []
        for d in durs:
            for i in ivals:
                mark, why = cell(name, d, i)
                marks.append(mark)
                if mark in "X!":
                    bad.append(f"{name} {d:g}s @ {i:g}s: {mark} {why}")
                if args.verbose:
                    print(f"  {name} {d:g}s@{i:g}: {mark} {why}")
        print(f"{name:24} " + " ".join(f"{m:>8}" for m in marks), flush=True)
    for line in bad:
        print(line)
    print(f"{len(bad)} wrong cell(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
