"""Records the real vLLM server in the regimes vtop must judge: tests/fixtures/real-regimes/.

    .venv/bin/python -m tools.vllm_cpu.regimes [REGIME …]     # default: every regime

Each regime is a server configuration and a client load (tools/vllm_cpu/load.py). The server is
started, loaded for `before` seconds, and then `vtop --url … --record FILE --duration …` runs as
a user would run it on the server's host: its own polling (four a second for the first 15 s
where /metrics answers fast, then one a second), its own discovery of the command-line knobs.
The traces are what the offline tests (tests/rules/test_real_regimes.py) and
bench/decisive_margin.py replay: the verdicts vtop gives on the real thing, without starting
vLLM. A regime's `rule` is what must name it (None: a server that is fine).

Why traces and not pages: a trace keeps the timing (the warm-up's polls, a slow answer, a
failed poll) that decides how soon a rule may speak, and replays through the same code.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import subprocess
import sys
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.vllm_cpu.load import LoadResult, Shape, closed_loop, poisson, waves
from tools.vllm_cpu.server import REPO_ROOT, make_server

OUT = REPO_ROOT / "tests" / "fixtures" / "real-regimes"
VTOP = REPO_ROOT / ".venv" / "bin" / "vtop"
SHORT = Shape(prompt_tokens=(16, 64), max_tokens=(64, 128))
WAVE = Shape(prompt_tokens=(16, 128), max_tokens=(200, 400))


@dataclass(frozen=True)
class Regime:
    rule: str | None
    what: str
    server: dict[str, Any]
    load: Callable[[str, float], Coroutine[Any, Any, LoadResult]]
    before: float = 15.0
    record: float = 75.0
    extra: dict[str, Any] = field(default_factory=dict)


REGIMES: dict[str, Regime] = {
    "kv": Regime(
        "memory-ceiling",
        "16 seats, a 3,072-token KV pool, 40 closed-loop clients: the pool is full and preempts",
        {"model": "engine", "max_num_seqs": 16, "num_gpu_blocks": 24},
        lambda u, d: closed_loop(u, concurrency=40, duration=d, drain=False),
    ),
    "kvlong": Regime(
        "memory-ceiling",
        "the same, attached after 4 minutes of load",
        {"model": "engine", "max_num_seqs": 16, "num_gpu_blocks": 24},
        lambda u, d: closed_loop(u, concurrency=40, duration=d, drain=False),
        before=240.0,
        record=60.0,
    ),
    "sweet": Regime(
        "past-sweet-spot",
        "8 seats, a 3,072-token KV pool, 16 closed-loop clients: the batch at its cap "
        "outgrows the pool and preempts",
        {"model": "engine", "max_num_seqs": 8, "num_gpu_blocks": 24},
        lambda u, d: closed_loop(u, concurrency=16, duration=d, drain=False),
    ),
    "budget2": Regime(
        "budget-too-small",
        "2 seats, a 20,480-token pool, 24 clients: the batch at its cap, 22 waiting",
        {"model": "engine", "max_num_seqs": 2, "num_gpu_blocks": 160},
        lambda u, d: closed_loop(u, concurrency=24, duration=d, shape=SHORT, drain=False),
    ),
    "budget4": Regime(
        "budget-too-small",
        "4 seats, a 20,480-token pool, 16 clients",
        {"model": "engine", "max_num_seqs": 4, "num_gpu_blocks": 160},
        lambda u, d: closed_loop(u, concurrency=16, duration=d, shape=SHORT, drain=False),
    ),
    "bursty": Regime(
        "budget-too-small",
        "16 seats, a roomy pool, Poisson arrivals at 3/s (more than 16 seats serve): the "
        "queue grows behind the cap",
        {"model": "engine", "max_num_seqs": 16, "num_gpu_blocks": 160},
        lambda u, d: poisson(u, rate=3.0, duration=d, drain=False),
    ),
    "waves": Regime(
        "client-static-batching",
        "16 seats, a roomy pool, a client sending 16 requests and waiting for all of them",
        {"model": "engine", "max_num_seqs": 16, "num_gpu_blocks": 160},
        lambda u, d: waves(u, wave_size=16, duration=d, shape=WAVE),
    ),
    "api": Regime(
        "frontend-bound",
        "the tiny model, 40 clients: the API server, not the engine, is the bottleneck (its "
        "pool, 24 blocks, preempts too)",
        {"model": "tiny", "max_num_seqs": 16, "num_gpu_blocks": 24},
        lambda u, d: closed_loop(u, concurrency=40, duration=d, drain=False),
    ),
    "prefill": Regime(
        "prefill-budget-bound",
        "16 seats, a 51,200-token pool, a 256-token step budget, 24 clients with prompts of "
        "1,000 to 1,500 tokens and short answers: each step is full of prompt",
        {
            "model": "engine",
            "max_num_seqs": 16,
            "num_gpu_blocks": 400,
            "max_num_batched_tokens": 256,
        },
        lambda u, d: closed_loop(
            u,
            concurrency=24,
            duration=d,
            drain=False,
            shape=Shape(prompt_tokens=(1000, 1500), max_tokens=(16, 32)),
        ),
    ),
    "full": Regime(
        None,
        "16 seats, a roomy pool, 16 clients: a well-sized server at full load, nothing waits",
        {"model": "engine", "max_num_seqs": 16, "num_gpu_blocks": 160},
        lambda u, d: closed_loop(u, concurrency=16, duration=d, drain=False),
    ),
    "light": Regime(
        None,
        "16 seats, one client: light load (underloaded, an INFO finding, at most)",
        {"model": "engine", "max_num_seqs": 16, "num_gpu_blocks": 160},
        lambda u, d: closed_loop(u, concurrency=1, duration=d, drain=False),
    ),
    "long": Regime(
        None,
        "16 seats, a 512-token step budget, 12 clients with prompts of 16 to 1,500 tokens",
        {
            "model": "engine",
            "max_num_seqs": 16,
            "num_gpu_blocks": 160,
            "max_num_batched_tokens": 512,
        },
        lambda u, d: closed_loop(
            u,
            concurrency=12,
            duration=d,
            drain=False,
            shape=Shape(prompt_tokens=(16, 1500), max_tokens=(32, 128)),
        ),
    ),
}


async def record(name: str, regime: Regime, suffix: str = "") -> Path:
    server = make_server(**regime.server).start()
    out = OUT / f"{name}{suffix}.vtrace"
    out.unlink(missing_ok=True)
    try:
        load = asyncio.create_task(regime.load(server.url, regime.before + regime.record + 30))
        await asyncio.sleep(regime.before)
        proc = await asyncio.create_subprocess_exec(
            str(VTOP),
            "--url",
            server.url,
            "--record",
            str(out),
            "--duration",
            f"{regime.record:g}s",
            stdin=subprocess.DEVNULL,
        )
        await proc.wait()
        load.cancel()
        await asyncio.gather(load, return_exceptions=True)
    finally:
        server.stop()
    out.chmod(0o644)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("regimes", nargs="*", help="default: every regime")
    parser.add_argument("--suffix", default="", help="added to each trace's name (e.g. -slowhost)")
    parser.add_argument(
        "--dtype",
        help="vLLM's --dtype (default: the model's, or float32 where bfloat16 is emulated)",
    )
    parser.add_argument("--seconds", type=float, help="how long to record (default: the regime's)")
    args = parser.parse_args(argv)
    names = args.regimes or list(REGIMES)
    for name in names:
        if name not in REGIMES:
            parser.error(f"unknown regime {name!r}; known: {', '.join(REGIMES)}")
        regime = REGIMES[name]
        if args.dtype:
            server = {**regime.server, "extra_args": ("--dtype", args.dtype)}
            regime = dataclasses.replace(regime, server=server)
        if args.seconds:
            regime = dataclasses.replace(regime, record=args.seconds)
        path = asyncio.run(record(name, regime, args.suffix))
        print(f"{name}: {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
