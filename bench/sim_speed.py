"""Simulated seconds per wall second, per scenario, busiest first.

The twin must outrun real time by a wide margin (target: 50x on a 2-core machine) so that
tests, benches and training traces are cheap. Each scenario runs for a fixed span of virtual
time after its warm-up; "busiest" is the one that moves the most tokens (prompt + generated)
per virtual second, i.e. the most scheduler work per second to simulate.

    .venv/bin/python bench/sim_speed.py [--seconds 600]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vtop.sim.scenarios import SCENARIOS
from vtop.sim.twin import Twin


def measure(name: str, seconds: float, macro: bool = True) -> tuple[float, float, float, float]:
    """(virtual s per wall s, engine steps, tokens, requests, each per virtual s)."""
    twin = Twin(name)
    twin.engine.macro_steps = macro
    twin.warm_up()
    st = twin.engine.stats
    steps0 = st.steps
    tok0 = st.prompt_tokens + st.generation_tokens
    req0 = sum(st.request_success.values())
    t0 = time.perf_counter()
    twin.advance(seconds)
    wall = time.perf_counter() - t0
    return (
        seconds / wall,
        (st.steps - steps0) / seconds,
        (st.prompt_tokens + st.generation_tokens - tok0) / seconds,
        (sum(st.request_success.values()) - req0) / seconds,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=600.0, help="virtual seconds per run")
    args = parser.parse_args()
    rows = [(name, *measure(name, args.seconds)) for name in SCENARIOS]
    rows.sort(key=lambda r: -r[3])
    print(f"{args.seconds:.0f} virtual seconds per scenario, after its warm-up\n")
    print(f"{'scenario':26}{'x real time':>12}{'steps/s':>9}{'tokens/s':>10}{'req/s':>7}")
    for name, speed, steps, tokens, reqs in rows:
        print(f"{name:26}{speed:>11.0f}x{steps:>9.0f}{tokens:>10.0f}{reqs:>7.1f}")
    busiest = rows[0]
    plain = measure(busiest[0], args.seconds, macro=False)[0]
    slowest = min(rows, key=lambda r: r[1])
    print(
        f"\nbusiest scenario: {busiest[0]}: {busiest[1]:.0f}x real time "
        f"({plain:.0f}x with decode runs off); slowest: {slowest[0]} {slowest[1]:.0f}x. "
        "Target >= 50x."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
