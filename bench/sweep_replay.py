"""How far is the twin's predicted change from what the real server did? Offline, on a
recorded sweep: no server, no restart, a second a configuration.

Why: `bench/tune_real.py` proves the twin against the real vLLM CPU server in 20-25 minutes a
regime, and on a 2-core box two runs of one configuration differ by up to a quarter. With
`--record-dir` it keeps what it measured: the 45 s report's window at the bad setting
(`<regime>-report.vtrace`) and each swept configuration's 60 s window
(`<regime>-seqs8.vtrace`, `-seqs12-fp8`, ...). This bench fits the twin to the report's
window exactly as `vtop whatif --replay` does (`vtop.whatif.predict.prepare`), predicts every
recorded configuration (the knobs its trace shows that differ from the report's), and reads
each configuration's trace through the same `figures` the self-check uses: the predicted
change (after/now - 1 on generated tokens/s) beside the measured one, and their difference in
points (target: within 10). The measured change is read against the sweep's own run of the
starting configuration where it has one (as `bench/tune_real.py` reads it: the same 60 s after
the same 15 s of load; the report's 45 s window of the same configuration read 7 % under it
once), else against the report's window. The configuration a report recommends on the
replayed window is printed too.

    .venv/bin/python -m bench.sweep_replay tests/fixtures/sweeps/*/
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from vtop import fmt
from vtop.knobs import KnobValue
from vtop.report.run import replay_document
from vtop.whatif.check import figures
from vtop.whatif.predict import WhatIf, prepare
from vtop.whatif.watched import Watched, read_trace

SWEPT = ("max_num_seqs", "max_num_batched_tokens", "kv_cache_dtype")
"""The knobs a sweep changes; a recorded configuration's are read from its trace."""
CHANGE_TARGET = 0.10
WINDOW_S = 300.0
"""What `vtop whatif --replay` fits to by default (`--window 5m`): the whole report window."""


def config_of(watched: Watched) -> dict[str, KnobValue]:
    """The swept knobs' values the trace's server reported."""
    return {
        name: knob.value
        for name in SWEPT
        if (knob := watched.knobs.get(name)) is not None and knob.value is not None
    }


def report_choice(trace: Path) -> str:
    """The flags the report on the replayed window recommends, or why none, in brackets."""
    doc = replay_document(str(trace))
    for finding in doc["findings"]:
        if finding["state"] == "firing" and finding["recommendations"]:
            return " ".join(r["flag"] for r in finding["recommendations"])
    return f"(none: {doc['status']})"


def _order(path: Path) -> tuple[int, str]:
    number = re.search(r"seqs(\d+)", path.name)
    return (int(number.group(1)) if number else 0, path.name)


def replay_sweep(folder: Path) -> list[float]:
    """Print one recorded sweep's table; the change errors (points) of its rows."""
    report = next(folder.glob("*-report.vtrace"), None)
    if report is None:
        print(f"{folder}: no *-report.vtrace", file=sys.stderr)
        return []
    watched = read_trace(str(report))
    whatif: WhatIf = prepare(watched, WINDOW_S)
    start = config_of(watched)
    runs: list[tuple[dict[str, KnobValue], dict[str, float | None]]] = []
    for trace in sorted(folder.glob("*.vtrace"), key=_order):
        if trace != report:
            run = read_trace(str(trace))
            runs.append((config_of(run), figures(run.store, None)))
    again = [got for config, got in runs if config == start]
    seen = (again[0] if again else whatif.check.observed).get("generation_tokens_per_s")
    print(f"\n{folder.name}: from {start}, {fmt.num(seen)} tok/s")
    print(f"  twin: {whatif.step.describe()}; self-check {whatif.check.confidence}")
    print(f"  report recommends: {report_choice(report)}")
    print(f"  {'configuration':<40} {'tok/s':>6} {'preempt/s':>9} {'change':>7} {'predicted':>9}")
    errors: list[float] = []
    for config, got in runs:
        changes = {k: v for k, v in config.items() if start.get(k) != v}
        tokens, preempt = got["generation_tokens_per_s"], got["preemptions_per_s"]
        change = tokens / seen - 1 if tokens is not None and seen else None
        band = whatif.predict(changes).figures.get("generation_tokens_per_s") if changes else None
        predicted = band.after / band.now - 1 if band is not None and band.now else 0.0
        off = ""
        if change is not None and changes:
            errors.append(abs(predicted - change))
            off = f"  {(predicted - change) * 100:+.0f} pts"
        label = " ".join(f"{k}={v}" for k, v in changes.items()) or "(start)"
        print(
            f"  {label:<40} {fmt.num(tokens):>6} {fmt.num(preempt):>9} "
            f"{_pct(change):>7} {_pct(predicted):>9}{off}"
        )
    if errors:
        within = sum(1 for e in errors if e <= CHANGE_TARGET)
        print(
            f"  => worst {max(errors) * 100:.0f} pts; {within} of {len(errors)} within "
            f"{CHANGE_TARGET * 100:.0f}"
        )
    return errors


def _pct(x: float | None) -> str:
    return fmt.DASH if x is None else f"{x:+.0%}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path, help="recorded sweeps (--record-dir)")
    args = parser.parse_args()
    every = [e for folder in args.folders for e in replay_sweep(folder)]
    if every:
        print(f"\nall: worst {max(every) * 100:.0f} pts, mean {sum(every) / len(every) * 100:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
