"""The replay screen's side of a day-long trace: the findings pass, seeks, and playing fast.

    python -m bench.replay [--hours 24] [--keep FILE]

`bench/trace.py` measures the source (a seek to the first frame, the 10 minutes of history a
screen reads). This measures what the replay screen adds on top, without a terminal:

- the findings pass (`vtop.ui.views.player.analyse`, the report's own pass, in a worker thread on
  the screen): its time and the evaluations it keeps;
- a seek (`Player.seek`): the source's seek plus the monitor rebuilt from the history the
  5-minute window needs (target < 200 ms), and the backfill a 1-hour window reads in a worker;
- playing: the cost of one frame fed to the screen's monitor, hence the CPU that 1000× asks
  for (a thousand frames a second), before drawing.

Wall times on a loaded machine run long; the CPU times are the ones to compare.
"""

from __future__ import annotations

import argparse
import random
import resource
import statistics
import tempfile
import time
from pathlib import Path

from bench.trace import build
from vtop.sources.replay import ReplaySource
from vtop.trace import TraceReader
from vtop.triage.engine import Engine
from vtop.ui.views.player import FindingsTimeline, Player, analyse


def clocks() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--keep", type=Path, help="keep (or reuse) the generated trace here")
    args = parser.parse_args()
    path = args.keep or Path(tempfile.mkdtemp(prefix="vtop-bench-")) / "day.vtrace"
    if not path.exists():
        build(path, args.hours)
    run(path)


def run(path: Path) -> None:
    engine = Engine.from_catalog(user=False)
    timeline = FindingsTimeline()
    w0, c0 = clocks()
    analysis = analyse(str(path), engine, [], on_chunk=timeline.extend)
    w1, c1 = clocks()
    print(
        f"findings     {w1 - w0:.1f} s ({c1 - c0:.1f} s CPU) for the pass over the trace: "
        f"{timeline.evaluations:,} evaluations every {analysis.step_s or 0:.1f} s, "
        f"{len(analysis.marks)} marks"
    )
    source = ReplaySource(TraceReader(path), paced=False)
    player = Player(source, capacity=3600, window_s=300.0)
    rng = random.Random(7)
    walls, cpus = [], []
    for _ in range(20):
        target = rng.uniform(player.start + 600, player.end)
        w0, c0 = clocks()
        player.seek(target)
        w1, c1 = clocks()
        walls.append(w1 - w0)
        cpus.append(c1 - c0)
    wall, cpu = statistics.median(walls) * 1e3, statistics.median(cpus) * 1e3
    print(
        f"seek         median {wall:.0f} ms ({cpu:.0f} ms CPU), max {max(walls) * 1e3:.0f} ms "
        f"({max(cpus) * 1e3:.0f} ms CPU): the source's seek and the monitor rebuilt for the "
        "5-minute window (target < 200 ms)"
    )
    player.window_s = 3600.0
    job = player.seek(rng.uniform(player.start + 3600, player.end))
    assert job is not None
    w0, c0 = clocks()
    monitor = job.run()
    w1, c1 = clocks()
    assert monitor is not None and player.adopt(job.generation, monitor)
    print(
        f"backfill     {w1 - w0:.2f} s ({c1 - c0:.2f} s CPU) to read the 1-hour window's "
        "history in a worker (the screen shows the last 6 minutes meanwhile)"
    )
    player.window_s = 300.0
    player.seek(player.start + 3600)
    n = 5000
    w0, c0 = clocks()
    fed = sum(player.step(1) for _ in range(n))
    w1, c1 = clocks()
    per = (c1 - c0) / fed
    print(
        f"playing      {per * 1e3:.3f} ms CPU per frame decoded and fed: {per * 1000 * 100:.0f}% "
        f"of a core at 1000× on a 1 s trace, {per * 10 * 100:.1f}% at 10× (before drawing)"
    )
    source.reader.close()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"memory       {rss:.0f} MiB peak resident")


if __name__ == "__main__":
    main()
