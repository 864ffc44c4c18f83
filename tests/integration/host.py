"""What the machine did to the tests' processes: the evidence that tells a late vtop from a
starved host.

CI's machines are virtual: a vCPU the host does not run for 30 s stalls whatever sits on it
(seen there: vtop runnable, its CPU time flat, while the tests' own process went on). Linux
counts that time per CPU as steal; a failure message that carries it says which it was.
"""

from __future__ import annotations

from pathlib import Path

import psutil

TICK_S = 0.01
"""USER_HZ: /proc/stat counts in hundredths of a second on every Linux this runs on."""


def steal_seconds() -> list[float]:
    """Each CPU's steal time since boot, in seconds (empty where /proc/stat is missing)."""
    try:
        lines = [ln.split() for ln in Path("/proc/stat").read_text().splitlines()]
    except OSError:
        return []
    return [
        int(f[8]) * TICK_S for f in lines if f[0].startswith("cpu") and f[0] != "cpu" and len(f) > 8
    ]


def steal_since(then: list[float]) -> str:
    """`steal 0.2, 31.0 s per CPU`: each CPU's steal since `then` (a `steal_seconds()`)."""
    now = steal_seconds()
    return (
        "steal " + ", ".join(f"{a - b:.1f}" for a, b in zip(now, then, strict=False)) + " s per CPU"
    )


POLICIES = {"0": "normal", "1": "fifo", "2": "rr", "3": "batch", "5": "idle", "6": "deadline"}


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def runnable_wait_s(pid: int) -> float | None:
    """Seconds `pid`'s main thread has spent ready to run and not run (schedstat), or None."""
    sched = _read(f"/proc/{pid}/schedstat").split()
    return int(sched[1]) / 1e9 if len(sched) >= 2 else None


def cpu_seconds_by_process() -> dict[int, tuple[str, float]]:
    """pid -> (command name, its CPU seconds so far, all its threads), for every process."""
    return {
        p.pid: (p.info["name"], sum(p.info["cpu_times"][:2]))
        for p in psutil.process_iter(["name", "cpu_times"])
        if p.info["cpu_times"]
    }


def scheduling(pid: int) -> str:
    """How Linux schedules `pid`: `nice 0, normal, autogroup-12 nice 0, CPUs 0-1, on CPU 1,
    ran 1.2 s, waited 40.0 s runnable, 310 forced switches` (schedstat's wait is the proof of
    starvation: time spent ready to run and not run). psutil has no policy, autogroup or
    schedstat: those come from /proc."""
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            nice, cpus, cpu = proc.nice(), proc.cpu_affinity(), proc.cpu_num()
            forced = proc.num_ctx_switches().involuntary
    except psutil.Error:
        return "gone"
    stat = _read(f"/proc/{pid}/stat").rsplit(")", 1)[-1].split()
    policy = stat[38] if len(stat) > 38 else "?"
    parts = [f"nice {nice}", POLICIES.get(policy, f"policy {policy}")]
    if autogroup := _read(f"/proc/{pid}/autogroup").strip():
        parts.append(autogroup.lstrip("/"))
    parts.append(f"CPUs {','.join(map(str, cpus or []))}, on CPU {cpu}")
    if len(sched := _read(f"/proc/{pid}/schedstat").split()) >= 2:
        parts.append(
            f"ran {int(sched[0]) / 1e9:.1f} s, waited {int(sched[1]) / 1e9:.1f} s runnable"
        )
    parts.append(f"{forced} forced switches")
    return ", ".join(parts)


def busiest_since(then: dict[int, tuple[str, float]], top: int = 5) -> str:
    """The processes that took the CPU since `then` (a `cpu_seconds_by_process()`), busiest
    first, each with how it is scheduled; and the machine's CPU pressure."""
    now = cpu_seconds_by_process()
    used = sorted(
        ((cpu - then.get(pid, (comm, 0.0))[1], pid, comm) for pid, (comm, cpu) in now.items()),
        reverse=True,
    )[:top]
    lines = [f"  {cpu:.1f} s CPU: pid {pid} {comm} ({scheduling(pid)})" for cpu, pid, comm in used]
    pressure = _read("/proc/pressure/cpu").splitlines()
    return (
        "busiest since the report began:\n"
        + "\n".join(lines)
        + (f"\n  CPU pressure: {pressure[0]}" if pressure else "")
    )
