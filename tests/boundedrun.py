"""The real `python -m vtop`, run as a user would, with its time and its memory measured.

A fuzz suite must catch a run that hangs or balloons, not only one that crashes; a wall-clock
timeout catches the first, and the child's own peak resident memory (from `wait4`, so neither
the test process nor another child counts) the second. A cap on the address space would not
do: vtop turns a `MemoryError` into one line and exit 3, which reads as a clean verdict.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Ran:
    """How a run of vtop ended, and what it cost."""

    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    peak_rss_mib: float
    killed: bool
    """True when it ran past its time and was killed."""


def run_vtop(*args: str, timeout_s: float = 60.0, cwd: Path | None = None) -> Ran:
    """`python -m vtop ARGS` from this checkout, without VTOP_API_KEY; killed past `timeout_s`."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("VTOP_API_KEY", None)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-m", "vtop", *args], stdout=out, stderr=err, cwd=cwd or ROOT, env=env
        )
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            proc.kill()

        timer = threading.Timer(timeout_s, kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - started
        out.seek(0)
        err.seek(0)
        return Ran(
            proc.returncode,
            out.read().decode("utf-8", "replace"),
            err.read().decode("utf-8", "replace"),
            wall,
            usage.ru_maxrss / 1024,
            killed.is_set(),
        )
