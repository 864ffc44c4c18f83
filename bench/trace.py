"""Trace figures on a synthetic day: bytes per poll and per day, seek time, report time.

    python -m bench.trace [--hours 24] [--keep FILE]

Builds a trace of one busy engine polled at 1 Hz (tests/tracegen.py: a 0.32 V1 page with
vLLM's buckets, counters and histograms fed by per-request observations, NVML and host
readings, through the real PageReader and the real Recorder), then measures:

- size: bytes per poll, per sample and per day (target: under 20 MB a day, near Prometheus'
  ~1.3 bytes per sample);
- opening: with the index footer, and without it (the recorder was killed: index rebuilt);
- seeking: time from an open reader to the first frame at a random time (target < 200 ms);
- reading: polls per second decoded, as light and as full frames;
- the report over the whole trace (target < 10 s), and the process's peak memory.

Generating a day takes a couple of minutes; `--keep FILE` keeps the trace (and reuses it when
FILE exists) so the measurements can be rerun without it.
"""

from __future__ import annotations

import argparse
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tests.tracegen import BusyEngine
from vtop.report.run import replay_document
from vtop.report.window import LIGHT
from vtop.sources.replay import ReplaySource
from vtop.trace import TraceReader
from vtop.trace.recorder import Recorder


def build(path: Path, hours: float) -> float:
    """Record `hours` of a busy engine at 1 Hz; returns seconds spent in the recorder."""
    polls = int(hours * 3600)
    engine = BusyEngine(seed=2024, start=1_750_000_000.0)
    spent = 0.0
    with Recorder(path, sources=["synthetic busy engine"], interval_s=1.0) as rec:
        for i in range(polls):
            engine.step()
            frame = engine.frame()
            t0 = time.perf_counter()
            rec.feed(frame)
            spent += time.perf_counter() - t0
            if i % 3600 == 0:
                print(f"  generating: hour {i // 3600 + 1} of {hours:g}", file=sys.stderr)
    return spent


def without_footer(path: Path, out: Path) -> None:
    with TraceReader(path) as r:
        end = r.data_end
    shutil.copyfile(path, out)
    with out.open("r+b") as fh:
        fh.truncate(end)


def timed(fn: Callable[..., object], *args: object) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--keep", type=Path, help="keep (or reuse) the generated trace here")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="vtop-bench-"))
    path = args.keep or tmp / "day.vtrace"
    write_s = None
    if not path.exists():
        write_s = build(path, args.hours)
    try:
        report(path, tmp, write_s)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def report(path: Path, tmp: Path, write_s: float | None) -> dict[str, float]:
    """Prints the figures of the trace at `path`; returns the headline ones."""
    t0 = time.perf_counter()
    reader = TraceReader(path)
    open_s = time.perf_counter() - t0
    stats = reader.stats()
    span = (stats.t_last or 0) - (stats.t_first or 0)
    size = path.stat().st_size
    per_day = size / span * 86400 if span else 0.0
    print(f"trace        {stats.polls:,} polls over {span / 3600:.2f} h, {size / 1e6:.2f} MB")
    print(
        f"size         {size / stats.polls:.1f} bytes/poll, {stats.samples / stats.polls:.0f} "
        f"samples/poll, {size / stats.samples:.3f} bytes/sample"
    )
    print(f"per day      {per_day / 1e6:.2f} MB at 1 Hz (target < 20 MB)")
    if write_s is not None:
        print(f"recording    {write_s / stats.polls * 1e6:.0f} µs per poll (encode + write)")
    print(
        f"open         {open_s * 1e3:.1f} ms with the index footer, {len(reader.keyframes)} "
        "keyframes"
    )
    bare = tmp / "bare.vtrace"
    without_footer(path, bare)
    t0 = time.perf_counter()
    with TraceReader(bare) as r2:
        assert not r2.indexed
    print(
        f"open         {(time.perf_counter() - t0) * 1e3:.1f} ms without it (index rebuilt "
        "by scanning)"
    )
    rng = random.Random(1)
    seeks = []
    start, end = reader.start or 0.0, reader.end or 0.0
    for _ in range(30):
        target = rng.uniform(start, end)
        t0 = time.perf_counter()
        next(iter(reader.frames(target)))
        seeks.append(time.perf_counter() - t0)
    print(
        f"seek         median {statistics.median(seeks) * 1e3:.1f} ms, max "
        f"{max(seeks) * 1e3:.1f} ms to the first frame at a random time (target < 200 ms)"
    )
    seek_max_ms = max(seeks) * 1e3
    replay = ReplaySource(TraceReader(path), paced=False)
    seeks = []
    for _ in range(10):
        t0 = time.perf_counter()
        replay.seek(rng.uniform(start, end), lookback_s=600)
        seeks.append(time.perf_counter() - t0)
    replay.reader.close()
    print(
        f"replay seek  median {statistics.median(seeks) * 1e3:.0f} ms, max "
        f"{max(seeks) * 1e3:.0f} ms with the 10 minutes of history a screen rebuilds from"
    )
    hour = min(3600.0, end - start)
    t0 = time.perf_counter()
    n = sum(1 for _ in reader.frames(start, start + hour, only=LIGHT))
    light = n / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    n = sum(1 for _ in reader.frames(start, start + hour))
    full = n / (time.perf_counter() - t0)
    print(f"read         {light:,.0f} polls/s as light frames, {full:,.0f} polls/s as full frames")
    reader.close()
    t0, c0 = time.perf_counter(), time.process_time()
    doc = replay_document(str(path))
    took, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(
        f"report       {took:.2f} s ({cpu:.2f} s CPU) over the whole trace "
        f"({doc['window']['evaluations']:,} rule evaluations every "
        f"{doc['window']['step_s']:.1f} s; target < 10 s for 24 h)"
    )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"memory       {rss:.0f} MiB peak resident (the whole bench)")
    return {"hours": span / 3600, "mb_per_day": per_day / 1e6, "bytes_per_sample":
            size / stats.samples, "report_s": took, "seek_max_ms": seek_max_ms}  # fmt: skip


if __name__ == "__main__":
    main()
