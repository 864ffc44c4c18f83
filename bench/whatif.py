"""What a what-if costs and how close it lands, on the simulator's scenarios.

For each scenario: five virtual minutes of it are read as vtop reads a server (a poll every
5 s, through the parser into a store); `vtop.whatif.predict.prepare` fits a twin from those
metrics alone (workload, step time, knobs from the page and the command line) and self-checks
it; then the change the scenario's rule recommends is predicted and set beside what the
scenario itself does with that change (read the same way). Printed: the self-check's error on
generated tokens/s and its confidence, the prediction against the truth for tokens/s and
queue time p50, and the wall time of the fit + self-check and of one prediction (the issue's
budget: under 2 s for a prediction over 5 minutes of workload).

    .venv/bin/python bench/whatif.py [--scenario NAME ...]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.simtools.polled import polled
from vtop.knobs import KnobValue
from vtop.sim.scenarios import get_scenario
from vtop.sim.twin import Twin
from vtop.whatif.check import figures
from vtop.whatif.predict import prepare

WINDOW_S = 300.0
CHANGES: dict[str, dict[str, KnobValue]] = {
    "budget-too-small": {"max_num_seqs": 64},
    "prefill-budget-bound": {"max_num_batched_tokens": 8192},
    "memory-ceiling": {"kv_cache_dtype": "fp8"},
    "past-sweet-spot": {"max_num_seqs": 96},
    "ttft-queueing": {"max_num_seqs": 128},
    "healthy": {"max_num_seqs": 128},
}
"""Each scenario's recommended change (its rule's, or a neutral one for the healthy server)."""


def warm(name: str, changes: dict[str, KnobValue] | None = None) -> Twin:
    scenario = get_scenario(name)
    if changes:
        scenario = replace(scenario, args=replace(scenario.args, **changes))  # type: ignore[arg-type]
    twin = Twin(scenario, seed=1, epoch=0.0)
    twin.warm_up()
    return twin


def fmt(x: float | None) -> str:
    return "–" if x is None else f"{x:.3g}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", action="append", help="scenario (default: all listed)")
    args = parser.parse_args()
    names = args.scenario or list(CHANGES)
    print(f"{WINDOW_S:.0f} s observed per scenario; twin: 30 s warm-up + 120 s read every 10 s\n")
    head = (
        f"{'scenario':22} {'change':28} {'check':>6} {'conf':>8} {'gen now':>8} "
        f"{'gen pred':>9} {'gen true':>9} {'err':>6} {'q50 pred':>9} {'q50 true':>9} "
        f"{'fit s':>6} {'pred s':>6}"
    )
    print(head)
    worst_pred = 0.0
    for name in names:
        change = CHANGES[name]
        watched = polled(warm(name), WINDOW_S)
        t0 = time.perf_counter()
        whatif = prepare(watched, WINDOW_S)
        t1 = time.perf_counter()
        prediction = whatif.predict(change)
        t2 = time.perf_counter()
        worst_pred = max(worst_pred, t2 - t1)
        truth = figures(polled(warm(name, change), WINDOW_S).store, WINDOW_S)
        gen = prediction.figures.get("generation_tokens_per_s")
        queue = prediction.figures.get("queue_p50")
        true_gen = truth["generation_tokens_per_s"]
        err = abs(gen.after - true_gen) / true_gen if gen is not None and true_gen else None
        check_err = whatif.check.errors["generation_tokens_per_s"]
        label = ", ".join(f"{k}={v}" for k, v in change.items())
        print(
            f"{name:22} {label:28} {fmt(check_err):>6} {prediction.confidence:>8} "
            f"{fmt(whatif.check.observed['generation_tokens_per_s']):>8} "
            f"{fmt(gen.after if gen else None):>9} {fmt(true_gen):>9} "
            f"{'–' if err is None else f'{err:.0%}':>6} "
            f"{fmt(queue.after if queue else None):>9} {fmt(truth['queue_p50']):>9} "
            f"{t1 - t0:6.2f} {t2 - t1:6.2f}"
        )
        if prediction.reason:
            print(f"  withheld: {prediction.reason}")
    print(f"\nslowest prediction: {worst_pred:.2f} s (budget 2 s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
