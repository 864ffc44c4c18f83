"""What hostile or unreachable servers cost a short report: wall time and peak memory.

Issue 26 (point 7) measured a 3 s report over 1,000 unreachable targets at 57 s and 900 MB,
and one over a Prometheus whose backfill answer is 180 MB at 39 s and 2.5 GB. This runs
`python -m vtop … --report --duration 3` as a user would, one process per case, and prints
each case's wall time and peak RSS (from wait4, the child's own), so a change is judged by
figures before and after:

1. `targets`: a targets file of N endpoints on loopback ports nothing listens on (each
   refused at once: what is left is vtop's own cost per endpoint).
2. `backfill`: a Prometheus (tests/hostileprom.py) whose one target is healthy but whose
   backfill answer is M MB of well-formed JSON.
3. `prometheus-down`: a Prometheus that reports N targets, every one down now (up == 0, its
   series stale, as Prometheus answers for a target it cannot scrape) after a short history
   of a real vLLM page: what is left is reading that history and judging N endpoints.

Run: `.venv/bin/python bench/hostile.py [--targets 1000] [--backfill-mb 180]
[--checkout DIR]`; `--checkout` runs the vtop of another checkout (the same tests/ helpers
serve it), e.g. a worktree of the commit before a change.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.hostileprom import (  # noqa: E402
    Fleet,
    HostilePrometheus,
    endless_matrix,
    healthy_answers,
    success,
)


def closed_ports(n: int) -> list[int]:
    """n loopback ports nothing listens on (bound to find them, then closed)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def run(checkout: Path, *args: str) -> tuple[float, float, int]:
    """(wall s, peak RSS MB, exit code) of `python -m vtop ARGS` from `checkout`."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    env.pop("VTOP_API_KEY", None)
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "vtop", *args], cwd=checkout, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.monotonic() - started, usage.ru_maxrss / 1024, proc.returncode


def show(case: str, figures: tuple[float, float, int]) -> None:
    wall, rss, code = figures
    print(f"{case:<34} {wall:7.1f} s {rss:8.0f} MB   exit {code}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=1000)
    parser.add_argument("--backfill-mb", type=float, default=180.0)
    parser.add_argument("--checkout", type=Path, default=ROOT)
    args = parser.parse_args()
    report = ("--report", "--duration", "3")
    print(f"vtop from {args.checkout}; a {report[-1]} s report each")
    with tempfile.TemporaryDirectory() as tmp:
        fleet = Path(tmp) / "fleet.txt"
        fleet.write_text("".join(f"http://127.0.0.1:{p}\n" for p in closed_ports(args.targets)))
        show(f"targets: {args.targets} refused", run(args.checkout, "--targets", str(fleet),
                                                      *report))  # fmt: skip

    with HostilePrometheus(backfill=lambda form: endless_matrix(args.backfill_mb)) as prom:
        show(f"backfill: {args.backfill_mb:g} MB answer",
             run(args.checkout, "--prometheus", prom.url, "--backfill", "1h", *report))  # fmt: skip

    page = healthy_answers().targets[("vllm", "127.0.0.1:8000")]
    down = Fleet({("vllm", f"10.0.{i // 250}.{i % 250}:8000"): page for i in range(args.targets)})

    def latest(form: Mapping[str, str]) -> dict[str, object]:
        """Each target's `up` (0) and scrape time: a target down has no other series."""
        t = time.time()
        result: list[dict[str, object]] = []
        for job, instance in down.targets:
            up = {"__name__": "up", "job": job, "instance": instance}
            scraped = {**up, "__name__": "vtop_scrape_timestamp", "vtop": "scrape_time"}
            result.append({"metric": up, "value": [t, "0"]})
            result.append({"metric": scraped, "value": [t, f"{t:.3f}"]})
        return success("vector", result)

    with HostilePrometheus(down, latest=latest) as prom:
        show(f"prometheus-down: {args.targets} targets",
             run(args.checkout, "--prometheus", prom.url, "--backfill", "5m", *report))  # fmt: skip


if __name__ == "__main__":
    main()
