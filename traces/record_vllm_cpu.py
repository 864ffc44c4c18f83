"""Records `vllm-cpu-kv-exhaustion.vtrace`: a real vLLM server running out of KV cache.

    python -m traces.record_vllm_cpu        (needs tools/vllm_cpu/setup.sh done)

A real vLLM 0.32 CPU server (tools/vllm_cpu: the ~100M-parameter `engine` model with random
weights, max_num_seqs 16, a KV pool forced to 24 blocks of 128 tokens = 3 072 tokens) is
recorded by `vtop --record` itself, in a subprocess, through three phases of closed-loop load:
4 clients (the pool has room), 40 clients (the pool is exhausted: requests wait, the scheduler
preempts), 4 clients again (it recovers). The README entry for the trace is written from what
the recording holds.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path

from tools.vllm_cpu.load import Shape, closed_loop
from tools.vllm_cpu.server import start_server
from vtop.trace import TraceReader

HERE = Path(__file__).parent
ROOT = HERE.parent
NAME = "vllm-cpu-kv-exhaustion.vtrace"
PHASES = ((4, 120.0), (40, 240.0), (4, 150.0))
"""(clients, seconds) of closed-loop load, in order."""


async def load(url: str) -> None:
    for clients, seconds in PHASES:
        await closed_loop(
            url, concurrency=clients, duration=seconds, shape=Shape(), drain=False, seed=clients
        )


def main() -> None:
    path = HERE / NAME
    path.unlink(missing_ok=True)
    with start_server("engine", max_num_seqs=16, num_gpu_blocks=24) as server:
        recorder = subprocess.Popen(
            [sys.executable, "-m", "vtop", "--url", server.url, "--record", str(path)],
            cwd=ROOT,
        )
        time.sleep(5)
        try:
            asyncio.run(load(server.url))
            time.sleep(10)
        finally:
            recorder.send_signal(signal.SIGTERM)
            recorder.wait(60)
    with TraceReader(path) as r:
        stats = r.stats()
    print(f"{NAME}: {stats.polls} polls, {path.stat().st_size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
