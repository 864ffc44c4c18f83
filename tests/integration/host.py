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


POLICIES = {"0": "normal", "1": "fifo", "2": "rr", "3": "batch", "5": "idle", "6": "deadline"}


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _stat(pid: int | str) -> list[str]:
    """/proc/PID/stat's fields after the command name: [0] is field 3 (state)."""
    text = _read(f"/proc/{pid}/stat")
    return text.rsplit(")", 1)[1].split() if ")" in text else []


def cpu_seconds_by_process() -> dict[int, tuple[str, float]]:
    """pid -> (command name, its CPU seconds so far, all its threads), for every process."""
    out: dict[int, tuple[str, float]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        text = _read(f"/proc/{entry.name}/stat")
        if ")" not in text:
            continue
        comm = text.split("(", 1)[1].rsplit(")", 1)[0]
        fields = text.rsplit(")", 1)[1].split()
        out[int(entry.name)] = (comm, (int(fields[11]) + int(fields[12])) * TICK_S)
    return out


def scheduling(pid: int) -> str:
    """How Linux schedules `pid`: `nice 0, normal, autogroup-12 nice 0, CPUs 0-1, on CPU 1,
    ran 1.2 s, waited 40.0 s runnable, 310 forced switches` (schedstat's wait is the proof of
    starvation: time spent ready to run and not run)."""
    fields = _stat(pid)
    if not fields:
        return "gone"
    status = dict(line.split(":", 1) for line in _read(f"/proc/{pid}/status").splitlines()
                  if ":" in line)  # fmt: skip
    parts = [f"nice {fields[16]}", POLICIES.get(fields[38], f"policy {fields[38]}")]
    if autogroup := _read(f"/proc/{pid}/autogroup").strip():
        parts.append(autogroup.lstrip("/"))
    parts += [f"CPUs {status.get('Cpus_allowed_list', '?').strip()}", f"on CPU {fields[36]}"]
    if len(sched := _read(f"/proc/{pid}/schedstat").split()) >= 2:
        parts.append(
            f"ran {int(sched[0]) / 1e9:.1f} s, waited {int(sched[1]) / 1e9:.1f} s runnable"
        )
    parts.append(f"{status.get('nonvoluntary_ctxt_switches', '?').strip()} forced switches")
    return ", ".join(parts)


def busiest_since(then: dict[int, tuple[str, float]], top: int = 5) -> str:
    """The processes that took the CPU since `then` (a `cpu_seconds_by_process()`), busiest
    first, each with how it is scheduled; and the machine's CPU pressure."""
    now = cpu_seconds_by_process()
    used = sorted(((cpu - then.get(pid, (comm, 0.0))[1], pid, comm)
                   for pid, (comm, cpu) in now.items()), reverse=True)[:top]  # fmt: skip
    lines = [f"  {cpu:.1f} s CPU: pid {pid} {comm} ({scheduling(pid)})" for cpu, pid, comm in used]
    pressure = _read("/proc/pressure/cpu").splitlines()
    return "busiest since the report began:\n" + "\n".join(lines) + (
        f"\n  CPU pressure: {pressure[0]}" if pressure else "")  # fmt: skip
