"""Whether a poll costs more as the dashboard's history grows: two hours of 1 s polls in minutes.

The soak (`bench/soak.py`) answers "is vtop as cheap after two hours as after ten minutes?" in
two hours of wall time, on a machine that must stay quiet all that while. This asks the part
of that question that is vtop's own code, fast: the dashboard (the real `VtopApp`, headless at
160×50) polls `vtop sim --scenario memory-ceiling` over HTTP through the live source, the
simulator running `--speed` times faster than real time, and each frame is restamped one
virtual second after the last before the monitor and the screen see it. So the history, the
rules' windows and the charts hold what two hours of 1 s polls leave, while the wall clock
runs `--speed` times faster. Printed every 10 virtual minutes: the CPU per poll spent
reading the server (HTTP, parse) and ingesting and drawing the frame (rules, screen), and the
RSS. vtop keeps 3,600 polls (an hour): the last line compares the last period with the first
one after the history filled, and exits 1 when the CPU per poll rose by more than 25 %.

What it leaves out, for the soak: whatever depends on wall time (terminal output, Textual's
idle timers, the host's other processes).

    .venv/bin/python -m bench.history_cost                  # 2 virtual hours, ~8 minutes
    .venv/bin/python -m bench.history_cost --hours 0.5 --speed 30
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import resource
import sys
import time

from bench.tui_overhead import serve_sim
from vtop.cli.sources import SourceSpec, make_source
from vtop.model import Frame
from vtop.monitor import Monitor
from vtop.ui.app import VtopApp

PERIOD_POLLS = 600  # ten virtual minutes at one poll a second
HISTORY_POLLS = 3600  # the Monitor's default capacity
CPU_DRIFT = 0.25


def restamped(frame: Frame, t: float) -> Frame:
    """`frame` as if polled at `t`: the store's windows count seconds, so a faster-than-real
    poll must look one second after the last."""
    scrapes = tuple(dataclasses.replace(s, t=t) for s in frame.scrapes)
    return dataclasses.replace(frame, t=t, scrapes=scrapes)


def rss_mb() -> float:
    """This process's peak RSS (Linux reports KiB): flat peak, flat memory."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def measure(url: str, polls: int, speed: float) -> list[tuple[int, float, float, float]]:
    """(polls so far, ms per poll reading, ms per poll ingesting and drawing, peak RSS MB)
    per period."""
    source = make_source(SourceSpec(urls=(url,), interval=1.0 / speed))
    app = VtopApp(source, Monitor(), interval=1.0, autopoll=False)
    rows = []
    async with app.run_test(size=(160, 50)) as pilot:
        t0 = time.time()
        read = drawn = 0.0
        for i in range(1, polls + 1):
            began = time.perf_counter()
            c0 = time.process_time()
            frame = await source.poll()
            c1 = time.process_time()
            app.ingest(restamped(frame, t0 + i))
            await pilot.pause()
            c2 = time.process_time()
            read, drawn = read + c1 - c0, drawn + c2 - c1
            if i % PERIOD_POLLS == 0:
                rows.append((i, read / PERIOD_POLLS * 1e3, drawn / PERIOD_POLLS * 1e3, rss_mb()))
                print(
                    f"{i / 60:7.0f} min  {rows[-1][1]:6.2f} ms  {rows[-1][2]:6.2f} ms  "
                    f"{rows[-1][3]:6.1f} MB",
                    flush=True,
                )
                read = drawn = 0.0
            await asyncio.sleep(max(0.0, 1.0 / speed - (time.perf_counter() - began)))
    await source.aclose()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hours", type=float, default=2.0, help="virtual hours (default 2)")
    parser.add_argument(
        "--speed", type=float, default=15.0, help="virtual seconds per wall second (default 15)"
    )
    args = parser.parse_args()
    polls = int(args.hours * 3600)
    url, sim = serve_sim("memory-ceiling", args.speed)
    try:
        print("  after   reading  ingest+draw  peak RSS   (CPU per poll)")
        rows = asyncio.run(measure(url, polls, args.speed))
    finally:
        sim.terminate()
        sim.wait()
    full = [r for r in rows if r[0] > HISTORY_POLLS]
    if len(full) < 2:
        print("history never filled: run for more than an hour (--hours)")
        return 0
    first, last = full[0], full[-1]
    before, after = first[1] + first[2], last[1] + last[2]
    drift = after / before - 1
    flat = drift <= CPU_DRIFT
    print(
        f"once the history is full: {before:.2f} -> {after:.2f} ms per poll ({drift:+.0%}), "
        f"peak RSS {first[3]:.1f} -> {last[3]:.1f} MB: {'flat' if flat else 'NOT flat'}"
    )
    return 0 if flat else 1


if __name__ == "__main__":
    sys.exit(main())
