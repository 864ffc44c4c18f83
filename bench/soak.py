"""Whether the live TUI stays cheap for hours: CPU per poll and RSS, period by period.

A dashboard left open on a rented GPU for an afternoon must cost at the end what it cost in its
first minute. A 60 s measurement (`bench/tui_overhead.py`) cannot show a slow leak or a history
that grows each poll dearer; this runs `vtop --url URL --interval 1` in a detached tmux pane
(160×50) against the simulator served over HTTP in its own process (`vtop sim --scenario
memory-ceiling`: every panel moves every second) for `--hours` (2 by default), and prints,
every `--period` minutes (10), the CPU vtop spent per poll (in ms, and in % of one core), its
RSS and the bytes it wrote to the terminal per second. vtop keeps the last 3,600 polls of
history (an hour at 1 s), so both figures rise, by design, until the history is full; the last
line compares the last period with the first one after the history filled: both figures flat
(within 25 % for CPU, 15 MB for RSS) or not, and exit 1 when not.

    .venv/bin/python -m bench.soak                  # 2 h
    .venv/bin/python -m bench.soak --hours 0.2 --period 2
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.tui_overhead import ROOT, cpu_seconds, mem_mb, serve_sim

SOCKET = "vtop-soak"
SIZE = (160, 50)
HISTORY_MIN = 3600 / 60  # the Monitor's default capacity, 3,600 polls, at one poll a second
CPU_DRIFT = 0.25  # the last period's CPU per poll may exceed the first's by this share
RSS_DRIFT_MB = 15.0


@dataclass(frozen=True)
class Period:
    end_min: float
    cpu_ms_per_poll: float
    cpu_pct: float
    rss_mb: float
    kbps: float


def tmux(*args: str, check: bool = True) -> str:
    argv = ["tmux", "-L", SOCKET, "-f", "/dev/null", *args]
    out = subprocess.run(argv, capture_output=True, text=True, check=check)
    return out.stdout.strip()


def start_vtop(url: str, log: Path) -> int:
    """vtop in a new tmux session, its output also piped to `log`; the pane's pid is vtop's."""
    argv = [sys.executable, "-m", "vtop", "--url", url, "--interval", "1"]
    command = f"cd {shlex.quote(str(ROOT))} && exec env COLORTERM=truecolor {shlex.join(argv)}"
    tmux("kill-server", check=False)
    tmux("new-session", "-d", "-s", "soak", "-x", str(SIZE[0]), "-y", str(SIZE[1]), command)
    tmux("pipe-pane", "-t", "soak", "-o", f"cat > {shlex.quote(str(log))}")
    return int(tmux("list-panes", "-t", "soak", "-F", "#{pane_pid}"))


def soak(url: str, *, hours: float, period_min: float, warmup_s: float) -> list[Period]:
    work = Path(tempfile.mkdtemp(prefix="vtop-soak-"))
    log = work / "vtop.out"
    pid = start_vtop(url, log)
    periods: list[Period] = []
    try:
        time.sleep(warmup_s)
        began = time.monotonic()
        cpu0, bytes0, t0 = cpu_seconds(pid), log.stat().st_size, began
        while time.monotonic() - began < hours * 3600 - 1:
            time.sleep(max(0.0, t0 + period_min * 60 - time.monotonic()))
            now = time.monotonic()
            cpu1, bytes1 = cpu_seconds(pid), log.stat().st_size
            seconds = now - t0  # one poll a second
            rss, _ = mem_mb(pid)
            row = Period(
                end_min=(now - began) / 60,
                cpu_ms_per_poll=(cpu1 - cpu0) / seconds * 1000,
                cpu_pct=(cpu1 - cpu0) / seconds * 100,
                rss_mb=rss,
                kbps=(bytes1 - bytes0) / seconds / 1000,
            )
            periods.append(row)
            print(
                f"{row.end_min:7.1f} min  {row.cpu_ms_per_poll:6.2f} ms/poll  "
                f"{row.cpu_pct:5.2f} % of a core  RSS {row.rss_mb:6.1f} MB  {row.kbps:5.2f} KB/s",
                flush=True,
            )
            cpu0, bytes0, t0 = cpu1, bytes1, now
    finally:
        tmux("kill-server", check=False)
    return periods


def period_len(periods: list[Period]) -> float:
    """Minutes one period spans."""
    return periods[0].end_min


def flat(periods: list[Period]) -> tuple[bool, str]:
    """Whether the last period costs what the first with a full history did (the first
    period, when the soak was shorter than the history), and the line that says so."""
    full = [p for p in periods if p.end_min - period_len(periods) >= HISTORY_MIN - 1e-6]
    first, last = (full or periods)[0], periods[-1]
    cpu_ok = last.cpu_ms_per_poll <= first.cpu_ms_per_poll * (1 + CPU_DRIFT)
    rss_ok = last.rss_mb - first.rss_mb <= RSS_DRIFT_MB
    line = (
        f"CPU per poll {first.cpu_ms_per_poll:.2f} → {last.cpu_ms_per_poll:.2f} ms "
        f"({'flat' if cpu_ok else 'GROWING'}), RSS {first.rss_mb:.1f} → {last.rss_mb:.1f} MB "
        f"({'flat' if rss_ok else 'GROWING'}) from {first.end_min - period_len(periods):.0f} to "
        f"{last.end_min:.0f} min{'' if full else ' (the history never filled)'}"
    )
    return cpu_ok and rss_ok, line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=2.0)
    parser.add_argument("--period", type=float, default=10.0, help="minutes per printed row")
    parser.add_argument("--warmup", type=float, default=20.0, help="seconds before the first row")
    parser.add_argument("--scenario", default="memory-ceiling")
    args = parser.parse_args(argv)
    url, sim = serve_sim(args.scenario)
    try:
        print(f"vtop --interval 1 at {SIZE[0]}x{SIZE[1]} against vtop sim {args.scenario}")
        periods = soak(url, hours=args.hours, period_min=args.period, warmup_s=args.warmup)
    finally:
        sim.kill()
    if not periods:
        print("soak: no period completed", file=sys.stderr)
        return 1
    ok, line = flat(periods)
    print(line)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
