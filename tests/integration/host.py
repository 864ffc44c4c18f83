"""What the machine did to the tests' processes: the evidence that tells a late vtop from a
starved host.

CI's machines are virtual: a vCPU the host does not run for 30 s stalls whatever sits on it
(seen there: vtop runnable, its CPU time flat, while the tests' own process went on). Linux
counts that time per CPU as steal; a failure message that carries it says which it was.
"""

from __future__ import annotations

from pathlib import Path

TICK_S = 0.01
"""USER_HZ: /proc/stat counts in hundredths of a second on every Linux this runs on."""


def steal_seconds() -> list[float]:
    """Each CPU's steal time since boot, in seconds (empty where /proc/stat is missing)."""
    try:
        lines = [ln.split() for ln in Path("/proc/stat").read_text().splitlines()]
    except OSError:
        return []
    return [int(f[8]) * TICK_S for f in lines
            if f[0].startswith("cpu") and f[0] != "cpu" and len(f) > 8]  # fmt: skip


def steal_since(then: list[float]) -> str:
    """`steal 0.2, 31.0 s per CPU`: each CPU's steal since `then` (a `steal_seconds()`)."""
    now = steal_seconds()
    return (
        "steal " + ", ".join(f"{a - b:.1f}" for a, b in zip(now, then, strict=False)) + " s per CPU"
    )
