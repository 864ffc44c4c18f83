"""README's Performance table, measured on this machine in one run.

    .venv/bin/python -m bench.performance [--seconds 60] [--hours 24] [--no-real] [--no-peer]

Why one entry point: the figures only mean something side by side and from the same machine,
the same minute and the same endpoints, so the table is never a collage of runs from different
days. It runs, in order:

1. the TUI at 1 Hz in tmux (160×50) against the simulator, with the peer `vllmstat` (PyPI)
   watching the same endpoint at the same time (`bench/tui_overhead.py`);
2. the same against a real vLLM CPU server (`tools/vllm_cpu`) kept busy by 8 closed-loop
   clients, unless `--no-real` or the server is not set up;
3. one poll's CPU cost (parse + catalog + store) against prometheus-client's parser alone, on
   the real vLLM 0.32 page (`bench/scrape.py`);
4. one evaluation of the whole rule catalog over an hour of 1 Hz history (`bench/triage.py`);
5. a day of 1 Hz recording: bytes per day, seek time, and the report over it
   (`bench/trace.py`; generating the day takes a few minutes).

Each step prints its own detail as it goes; the Markdown table comes last, ready to paste.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench import scrape, trace, triage, tui_overhead
from bench.tui_overhead import Figures
from tools.vllm_cpu.server import missing_setup
from vtop import __version__

ROOT = Path(__file__).resolve().parents[1]
SIZE = (160, 50)
ENV = {"COLORTERM": "truecolor"}


@dataclass
class Row:
    """One line of the table: what was measured, vtop's figure, the peer's, the target."""

    what: str
    vtop: str
    peer: str = ""
    target: str = ""


def fmt(value: float | None, spec: str, unit: str = "") -> str:
    return "–" if value is None else f"{value:{spec}}{unit}"


def tui_rows(where: str, figures: list[Figures]) -> list[Row]:
    ours = figures[0]
    theirs = figures[1] if len(figures) > 1 else Figures("peer")
    return [
        Row(
            f"TUI CPU, % of one core ({where})",
            fmt(ours.cpu_pct, ".2f"),
            fmt(theirs.cpu_pct, ".2f"),
            "≤ 1",
        ),
        Row(f"TUI RSS, MB ({where})", fmt(ours.rss_mb, ".0f"), fmt(theirs.rss_mb, ".0f"), "≤ 120"),
        Row(
            f"bytes to the terminal, KB/s ({where})",
            fmt(ours.kbps, ".2f"),
            fmt(theirs.kbps, ".2f"),
            "≤ 5",
        ),
    ]


@contextlib.contextmanager
def simulator() -> Iterator[str]:
    url, proc = tui_overhead.serve_sim("memory-ceiling")
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@contextlib.contextmanager
def busy_real_server(seconds: float) -> Iterator[str]:
    """A real vLLM CPU server, and 8 clients keeping it busy for `seconds`."""
    from bench._realserver import start_alone

    server = start_alone(max_num_seqs=16, num_gpu_blocks=64)
    load = None
    try:
        load = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tools.vllm_cpu.load",
                server.url,
                "--mode",
                "closed",
                "--concurrency",
                "8",
                "--duration",
                str(seconds),
                "--no-drain",
                "--max-tokens",
                "32:128",
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(5)  # the first requests are in: the page has histograms with counts
        yield server.url
    finally:
        if load is not None:
            load.kill()
            load.wait()
        server.stop()


def machine() -> str:
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    cpu = model or platform.processor()
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="TUI measurement, per endpoint")
    ap.add_argument("--warmup", type=float, default=20.0)
    ap.add_argument("--hours", type=float, default=24.0, help="length of the recorded trace")
    ap.add_argument("--no-real", action="store_true", help="skip the real vLLM server")
    ap.add_argument("--no-peer", action="store_true", help="do not run vllmstat")
    ap.add_argument(
        "--cache",
        type=Path,
        default=Path(tempfile.gettempdir()) / "vtop-bench",
        help="where the peer's venv is kept between runs",
    )
    args = ap.parse_args()
    rows: list[Row] = []
    peer = "–"
    watch = functools.partial(
        tui_overhead.measure,
        seconds=args.seconds,
        warmup=args.warmup,
        size=SIZE,
        env=ENV,
        peer=not args.no_peer,
        cache=args.cache,
    )

    print("== 1. the TUI against the simulator", flush=True)
    with simulator() as url:
        figures = watch(url)
    peer = figures[1].name if len(figures) > 1 else peer
    rows += tui_rows("simulator", figures)

    why_not = "--no-real" if args.no_real else missing_setup()
    if why_not is None:
        print("== 2. the TUI against a real vLLM CPU server under load", flush=True)
        with busy_real_server(args.seconds + args.warmup + 30) as url:
            figures = watch(url)
        rows += tui_rows("real vLLM CPU server", figures)
    else:
        print(f"== 2. skipped, no real server: {why_not}", flush=True)

    print("== 3. one poll, against prometheus-client's parser", flush=True)
    ours, theirs = scrape.measure("vLLM 0.32 page", scrape.FIXTURE.read_text())
    rows.append(
        Row(
            "one poll's CPU, ms (parse + store; prometheus-client: parse only)",
            f"{ours * 1e3:.3f}",
            f"{theirs * 1e3:.3f} (prometheus-client)",
            "≥ 10× cheaper",
        )
    )

    print("== 4. the rule catalog over an hour of history", flush=True)
    samples = triage.evaluation_ms(3600, 300)
    rows.append(
        Row(
            "rule evaluation, whole catalog, 1 h of history, ms (median)",
            f"{samples[len(samples) // 2]:.2f}",
            "",
            "< 2",
        )
    )

    print(f"== 5. {args.hours:g} h of 1 Hz recording", flush=True)
    with tempfile.TemporaryDirectory(prefix="vtop-bench-") as tmp:
        path = Path(tmp) / "day.vtrace"
        write_s = trace.build(path, args.hours)
        day = trace.report(path, Path(tmp), write_s)
    rows.append(Row("trace size, MB per day at 1 Hz", f"{day['mb_per_day']:.1f}", "", "< 20"))
    rows.append(
        Row(f"report over a {day['hours']:.0f} h trace, s", f"{day['report_s']:.1f}", "", "< 10")
    )
    rows.append(
        Row(
            f"seek in a {day['hours']:.0f} h trace, ms (worst of 30)",
            f"{day['seek_max_ms']:.0f}",
            "",
            "< 200",
        )
    )

    print()
    print(
        f"vtop {__version__} on {machine()}; peer: {peer}; TUI {SIZE[0]}×{SIZE[1]} in tmux, "
        f"1 s polls, {args.seconds:.0f} s measured after {args.warmup:.0f} s"
    )
    print()
    print("| measured | vtop | vllmstat | target (vtop) |")
    print("|---|---:|---:|---:|")
    for row in rows:
        print(f"| {row.what} | {row.vtop} | {row.peer} | {row.target} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
