"""Fleet figures: vtop's CPU while polling many endpoints, and the first screen from Prometheus.

1. CPU: `vtop sim --instances N` serves N simulated vLLM servers in another process; vtop polls
   them at 1 Hz for a minute, headless, through exactly what `vtop --url … × N` builds
   (`cli.make_source`: LiveSource with the local GPU/host readers) feeding a `Monitor` (and its
   rule engine, where there is one). Printed: vtop's CPU in % of one core (target <= 15% for
   32 endpoints), poll latency, RSS.
2. First screen from Prometheus: an hour of history for N instances is rendered from
   simulator twins in virtual time (a few distinct twins, each page labelled for several
   instances), written as OpenMetrics, turned into TSDB blocks with `promtool tsdb
   create-blocks-from openmetrics`, and served by a real Prometheus. Printed: the time from
   `vtop --prometheus` starting to the first frame with that hour ingested (backfill queries,
   conversion to Scrapes, Monitor.feed), and how much it read.

Run: `.venv/bin/python bench/fleet.py [--endpoints 32] [--seconds 60] [--skip-cpu]
[--skip-prometheus]`. Needs the Debian `prometheus` package for part 2.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.prom import (  # noqa: E402
    MISSING,
    PrometheusServer,
    create_blocks,
    free_port,
    history_openmetrics,
    twin_scrapes,
)
from vtop.cli import SourceSpec, build_parser, make_source  # noqa: E402
from vtop.monitor import Monitor  # noqa: E402
from vtop.sources.prometheus import PrometheusSource  # noqa: E402


def _free_block(n: int) -> int:
    """A first port with n free ports after it (checked by binding each)."""
    import socket

    for _ in range(50):
        base = free_port()
        if base + n > 65000:
            continue
        socks = []
        try:
            for p in range(base, base + n):
                s = socket.socket()
                s.bind(("127.0.0.1", p))
                socks.append(s)
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no block of free ports")


def cpu(endpoints: int, seconds: float, scenario: str, warmup: float) -> None:
    port = _free_block(endpoints)
    sim = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vtop",
            "sim",
            "--scenario",
            scenario,
            "--instances",
            str(endpoints),
            "--port",
            str(port),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    urls = [f"http://127.0.0.1:{port + i}" for i in range(endpoints)]
    try:
        deadline = time.monotonic() + 60
        for url in urls:
            while True:
                try:
                    if httpx.get(url + "/health", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline or sim.poll() is not None:
                    raise RuntimeError("the simulated servers did not start")
                time.sleep(0.1)
        args = build_parser().parse_args([a for u in urls for a in ("--url", u)])
        polls, cpu_s, wall_s, latencies, engine = asyncio.run(_poll(args, seconds, warmup))
    finally:
        sim.terminate()
        sim.wait(timeout=10)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    lat = sorted(latencies)
    print(
        f"CPU: {endpoints} endpoints ({scenario}) polled at 1 Hz for {wall_s:.0f} s "
        f"({polls} polls) after {warmup:.0f} s of warm-up, headless LiveSource + Monitor{engine}"
    )
    print(
        f"  vtop CPU {100 * cpu_s / wall_s:.1f}% of one core (target <= 15%); "
        f"poll+ingest p50 {1e3 * statistics.median(lat):.0f} ms, "
        f"p95 {1e3 * lat[int(0.95 * (len(lat) - 1))]:.0f} ms; max RSS {rss:.0f} MiB"
    )


async def _poll(
    args: argparse.Namespace, seconds: float, warmup: float
) -> tuple[int, float, float, list[float], str]:
    source = make_source(SourceSpec.from_args(args))
    monitor = Monitor()
    engine = " + rule engine" if getattr(monitor, "engine", None) is not None else ""
    latencies: list[float] = []
    # warm-up: connect, read /version and /v1/models, teach the page readers their routes, and
    # (with --warmup 300) fill the rules' longest windows so they cost what they do all day
    for _ in range(max(3, int(warmup))):
        monitor.feed(await source.poll())
        await asyncio.sleep(1.0)
    loop = asyncio.get_running_loop()
    cpu0, wall0 = time.process_time(), loop.time()
    polls = 0
    while loop.time() - wall0 < seconds:
        tick = loop.time()
        monitor.feed(await source.poll())
        latencies.append(loop.time() - tick)
        polls += 1
        await asyncio.sleep(max(0.0, tick + 1.0 - loop.time()))
    cpu_s, wall_s = time.process_time() - cpu0, loop.time() - wall0
    await source.aclose()
    bad = [v.last.error for v in monitor.endpoints.values() if v.last is not None and v.last.error]
    if bad:
        print(f"  note: {len(bad)} endpoints failing at the end, e.g. {bad[0]}")
    return polls, cpu_s, wall_s, latencies, engine


def first_screen(
    endpoints: int, minutes: float, twins: int, scrape_s: float, keep: Path | None
) -> None:
    if MISSING:
        print(f"first screen from Prometheus: skipped, {MISSING}")
        return
    scenarios = ["budget-too-small", "memory-ceiling", "healthy", "past-sweet-spot"]
    with tempfile.TemporaryDirectory(prefix="vtop-bench-") as tmp_name:
        tmp = keep or Path(tmp_name)
        tmp.mkdir(parents=True, exist_ok=True)
        if keep is not None and (keep / "data").is_dir():
            print(f"first screen from Prometheus: the history kept in {keep}")
            with PrometheusServer.start(tmp / "prom", data=tmp / "data") as prom:
                monitor, took = asyncio.run(_first(prom.url, minutes * 60))
            _print_first(monitor, took)
            return
        end = time.time() - 5
        start = end - minutes * 60
        t0 = time.perf_counter()
        distinct = [
            list(
                twin_scrapes(
                    scenarios[i % len(scenarios)], seed=i, start=start, end=end, step_s=scrape_s
                )
            )
            for i in range(twins)
        ]
        pages = {
            ("vllm", f"10.0.{i // 250}.{i % 250 + 1}:8000"): distinct[i % twins]
            for i in range(endpoints)
        }
        om = tmp / "history.om"
        samples = history_openmetrics(pages, om)
        t1 = time.perf_counter()
        create_blocks(om, tmp / "data")
        t2 = time.perf_counter()
        size = om.stat().st_size
        om.unlink()
        print(
            f"first screen from Prometheus: {endpoints} instances x {minutes:g} min scraped "
            f"every {scrape_s:g} s ({samples / 1e6:.1f} M samples, {size / 1e6:.0f} MB of "
            f"OpenMetrics from {twins} twins in {t1 - t0:.0f} s; promtool {t2 - t1:.0f} s)"
        )
        with PrometheusServer.start(tmp / "prom", data=tmp / "data") as prom:
            monitor, took = asyncio.run(_first(prom.url, minutes * 60))
        _print_first(monitor, took)


def _print_first(monitor: Monitor, took: tuple[float, float, int, int, float, float]) -> None:
    print(
        f"  first screen after {took[0] + took[1]:.1f} s: {took[2]} scrapes of "
        f"{len(monitor.endpoints)} instances in {took[3]} queries; query + convert "
        f"{took[0]:.1f} s (vtop CPU {took[4]:.1f} s), Monitor.feed {took[1]:.1f} s "
        f"(CPU {took[5]:.1f} s)"
    )


async def _first(
    url: str, backfill_s: float
) -> tuple[Monitor, tuple[float, float, int, int, float, float]]:
    monitor = Monitor()
    t0, c0 = time.perf_counter(), time.process_time()
    async with PrometheusSource(url, backfill_s=backfill_s) as src:
        frame = await src.poll()
        t1, c1 = time.perf_counter(), time.process_time()
        monitor.feed(frame)
        t2, c2 = time.perf_counter(), time.process_time()
        bad = [s.error for s in frame.scrapes if s.error]
        if bad:
            print(f"  note: {len(bad)} failed scrapes, e.g. {bad[0]}")
        return monitor, (t1 - t0, t2 - t1, len(frame.scrapes), src.queries, c1 - c0, c2 - c1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--endpoints", type=int, default=32)
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--scenario", default="budget-too-small")
    p.add_argument(
        "--warmup",
        type=float,
        default=300.0,
        help="seconds polled before measuring (the rules' 5-minute windows fill)",
    )
    p.add_argument("--minutes", type=float, default=60.0, help="history held by Prometheus")
    p.add_argument("--twins", type=int, default=8, help="distinct simulated histories")
    p.add_argument("--scrape", type=float, default=15.0, help="scrape interval of the history")
    p.add_argument("--skip-cpu", action="store_true")
    p.add_argument("--skip-prometheus", action="store_true")
    p.add_argument("--keep", type=Path, help="keep the history in DIR (and reuse it next time)")
    args = p.parse_args()
    print(f"host: {os.cpu_count()} cores, Python {sys.version.split()[0]}")
    if not args.skip_cpu:
        cpu(args.endpoints, args.seconds, args.scenario, args.warmup)
    if not args.skip_prometheus:
        first_screen(args.endpoints, args.minutes, args.twins, args.scrape, args.keep)


if __name__ == "__main__":
    main()
