"""What one start of the real vLLM CPU server costs, compiled or eager, with or without the
compile cache: the figures behind tools/vllm_cpu/server.py's choice to stay compiled.

Why CPU seconds: CI's real-server pass starts vLLM once per configuration, and on a machine
other work shares, a start's wall time says more about the neighbours than about the start.
The CPU time of the server's process group until /health answers (its own, and that of the
compile workers it reaped) does not depend on them. The step cost is read the same way: CPU
milliseconds per scheduled token under 16 closed-loop clients, beside the tokens per second.

Each mode starts the `engine` model (16 seats, 160 blocks) with its own compile cache folder
(`VLLM_CACHE_ROOT`, `TORCHINDUCTOR_CACHE_DIR`): `cold` an empty one (CI's first start),
`warm` the one `cold` left (a later start in the same run), `eager` with `--enforce-eager`.

    .venv/bin/python -m bench.vllm_start [--modes cold,warm,eager] [--load-s 40]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._realserver import stop_on_sigterm, wait_alone
from tools.vllm_cpu.load import Shape, closed_loop
from tools.vllm_cpu.server import VllmServer, make_server

MODES = {"cold": ("a", ()), "warm": ("a", ()), "eager": ("b", ("--enforce-eager",))}
"""mode -> (its cache folder, vLLM arguments): `warm` reuses the folder `cold` filled."""
TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def group_cpu_s(pgid: int) -> float:
    """CPU seconds of every process in the group, with the children each has reaped."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # utime, stime, cutime, cstime
            total += sum(int(f) for f in fields[11:15]) * TICK_S
    return total


def measure(mode: str, cache: Path, load_s: float) -> str:
    folder, extra = MODES[mode]
    os.environ["VLLM_CACHE_ROOT"] = str(cache / folder / "vllm")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache / folder / "inductor")
    server: VllmServer = make_server("engine", num_gpu_blocks=160, extra_args=extra)
    server.niceness = 0  # its CPU is what is measured; a starved start only takes longer
    wait_alone()
    began = time.monotonic()
    with server:
        start_s = time.monotonic() - began
        start_cpu = group_cpu_s(server.pid)
        shape = Shape(prompt_tokens=(16, 64), max_tokens=(64, 128))
        run = asyncio.run(closed_loop(server.url, concurrency=16, duration=load_s, shape=shape))
        step_cpu = group_cpu_s(server.pid) - start_cpu
    tokens = run.completion_tokens + run.prompt_tokens
    return (
        f"{mode:6} start {start_cpu:5.1f} CPU s ({start_s:5.1f} s wall,"
        f" load {os.getloadavg()[0]:.1f})"
        f"  16 clients: {run.completion_tokens / run.elapsed:6.1f} tok/s,"
        f" {1000 * step_cpu / max(tokens, 1):.2f} CPU ms per token"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--modes", default="cold,warm,eager", help="comma-separated: cold, warm, eager"
    )
    parser.add_argument("--load-s", type=float, default=40.0, help="seconds of 16 clients")
    opts = parser.parse_args(argv)
    modes = opts.modes.split(",")
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        parser.error(f"unknown mode {unknown[0]!r}; expected {', '.join(MODES)}")
    stop_on_sigterm()
    with tempfile.TemporaryDirectory(prefix="vllm-start-") as tmp:
        for mode in modes:
            print(measure(mode, Path(tmp), opts.load_s), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
