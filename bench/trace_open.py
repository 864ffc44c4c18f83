"""Opening crafted traces: CPU seconds per megabyte, for this vtop and (optionally) an older one.

    python -m bench.trace_open [--before GIT_REF] [--timeout 120] [--scale 1.0]

Issue 26: a trace whose every poll redefined every series took 15 s to open at 66 KB, 35 s at
131 KB, ~40 minutes at 1 MB (each redefinition renumbered every other series). Each family of
`tests/tracecraft.py` is a way a body can cost more than its bytes; this script writes each at
two sizes (the growth between them shows linear or not), then opens it in a fresh process as
`vtop trace info` does (header, index rebuilt by scanning, totals by decoding every poll) and
prints the child's CPU time and its seconds per MB. `--before REF` runs the same files through
the `vtop/` of that commit (extracted with `git archive`), cut at `--timeout` seconds.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from io import BytesIO
from pathlib import Path

from tests import tracecraft as tc
from vtop.trace import wire

ROOT = Path(__file__).resolve().parents[1]

FAMILIES: dict[str, Callable[[float], bytes]] = {
    "redefine every series (series limit)": lambda k: tc.redefinition_trace(
        int(wire.MAX_SERIES * k), 2
    ),
    "redefine 4 000 series each poll": lambda k: tc.redefinition_trace(4000, int(40 * k)),
    "redefine 200 series each poll": lambda k: tc.redefinition_trace(200, int(2000 * k)),
    "move 300 series each poll": lambda k: tc.move_trace(300, int(4000 * k)),
    "toggle 8 000 series each poll": lambda k: tc.toggle_trace(8000, int(600 * k)),
    "100 000 slots change each poll": lambda k: tc.churn_trace(100_000, int(600 * k)),
    "large metadata each poll": lambda k: tc.meta_trace(300, int(1000 * k)),
    "tiny polls": lambda k: tc.tiny_trace(int(60_000 * k)),
}

OPEN = """
import sys
sys.path.insert(0, sys.argv[1])
from vtop.trace.reader import TraceReader
with TraceReader(sys.argv[2], warn=lambda m: None) as r:
    r.check()
    r.stats()
"""


def cpu_of(tree: Path, trace: Path, timeout: float, base: float = 0.0) -> float | None:
    """CPU seconds a fresh process spends opening `trace` with the vtop in `tree`, less `base`
    (the process's start); None: cut at `timeout`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        subprocess.run(
            [sys.executable, "-c", OPEN, str(tree), str(trace)], timeout=timeout, check=True
        )
    except subprocess.TimeoutExpired:
        return None
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return max(0.0, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime - base)


def extract(ref: str, into: Path) -> Path:
    """The `vtop/` package of commit `ref`, in a directory of its own."""
    data = subprocess.run(
        ["git", "archive", ref, "vtop"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def shown(cpu: float | None, mb: float, timeout: float) -> str:
    if cpu is None:
        return f"{'>' + format(timeout, '.0f'):>8} s {'(cut)':>12}"
    return f"{cpu:8.2f} s {cpu / mb:8.2f} s/MB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", metavar="GIT_REF", help="also time this commit's vtop")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per run")
    parser.add_argument("--scale", type=float, default=1.0, help="size of the larger files")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="vtop-bench-open-"))
    old = extract(args.before, tmp / "before") if args.before else None
    empty = tmp / "empty.vtrace"
    empty.write_bytes(tc.tiny_trace(1))
    trees = [ROOT, *([old] if old is not None else [])]
    bases = {tree: min(cpu_of(tree, empty, 60) or 0.0 for _ in range(3)) for tree in trees}
    print(f"(less each process's start: {bases[ROOT]:.2f} s)")
    head = f"{'family':40} {'size':>9}  {'this vtop':>23}"
    print(head + (f"  {args.before:>23}" if old else ""))
    for name, make in FAMILIES.items():
        for k in (args.scale / 2, args.scale):
            path = tmp / "t.vtrace"
            path.write_bytes(make(k))
            mb = path.stat().st_size / 1e6
            now = shown(cpu_of(ROOT, path, args.timeout, bases[ROOT]), mb, args.timeout)
            line = f"{name:40} {mb * 1000:7.0f} KB  {now}"
            if old is not None:
                then = cpu_of(old, path, args.timeout, bases[old])
                line += f"  {shown(then, mb, args.timeout)}"
            print(line, flush=True)
    print(f"budget: {wire.COST_PER_BYTE} work units a byte (about a ns each on a slow core)")


if __name__ == "__main__":
    main()
