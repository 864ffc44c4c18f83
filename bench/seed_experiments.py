"""Rerun the seed chapter's two max_num_seqs experiments on the twin and print them beside
the seed's own figures (see tests/simtools/seed_experiments.py for the set-up and why it has
bursts).

    .venv/bin/python bench/seed_experiments.py [--seed N]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.simtools import seed_experiments as experiments


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    t0 = time.perf_counter()
    res = experiments.run_all(seed=args.seed)
    print(
        "Seed experiments on 4090 + Qwen2.5-7B-Instruct-AWQ, bursty chat load "
        f"(seed {args.seed}; 480 virtual s per configuration)\n"
    )
    print(experiments.report(res))
    for run in (res.at64, res.at256, res.at512):
        print(f"\n  max_num_seqs {run.max_num_seqs}: {run.window.line()}")
    print(
        "\nNote: the seed's figures are illustrative. At 64 slots this load exceeds capacity on"
        "\naverage, so the twin's queue and its queueing time keep growing through the window;"
        "\nat 256 the queue only forms during bursts; at 512 the bursts are admitted whole and"
        "\noutgrow the KV pool."
    )
    print(f"\n({time.perf_counter() - t0:.1f} s wall)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
