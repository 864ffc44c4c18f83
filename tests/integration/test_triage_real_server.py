"""The rule catalog on a real vLLM server (CPU build): the two verdicts the issue asks for.

vtop runs as a user would run it on the server's host: the live source polls /metrics once a
second, finds the server's process and reads its command-line knobs, and the shipped catalog
evaluates every poll through `Monitor`. The load comes from tools/vllm_cpu's closed-loop
clients. Rules wait for a minute or more of evidence, so each test loads the server for long
enough to let them speak.

- KV exhausted (16 seats, a 3,072-token pool, 40 clients; the shared run of kv_run.py):
  memory-ceiling fires, and at no poll does any rule advise raising max_num_seqs.
- Budget too small (4 seats, a pool that holds far more, 16 clients): budget-too-small fires
  and recommends a higher max_num_seqs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from tests.integration.kv_run import KvRun
from tools.vllm_cpu.load import Shape, closed_loop
from tools.vllm_cpu.server import VllmServer
from vtop.model import Finding
from vtop.monitor import Monitor
from vtop.sources.live import LiveSource
from vtop.sources.local import LocalHost
from vtop.sources.vllm import ScrapeOptions
from vtop.triage.engine import Engine

pytestmark = [pytest.mark.integration, pytest.mark.slow]


async def watch(url: str, seconds: float, clients: int, shape: Shape,
                until: Callable[[list[Finding]], bool]) -> list[list[Finding]]:  # fmt: skip
    """Load the server for at most `seconds` while vtop polls it at 1 Hz, until the findings
    satisfy `until`; the findings after every poll."""
    local = LocalHost()
    source = LiveSource([url], ScrapeOptions.from_env(interval_s=1.0),
                        process_probe=local.process_knobs)  # fmt: skip
    monitor = Monitor(engine=Engine(Engine.from_catalog(user=False).rules))
    history: list[list[Finding]] = []
    load = asyncio.create_task(closed_loop(url, concurrency=clients, duration=seconds,
                                           shape=shape, seed=11, drain=False))  # fmt: skip
    try:
        async with source:
            while not load.done():
                began = time.monotonic()
                monitor.feed(await source.poll())
                view = next(iter(monitor.endpoints.values()))
                history.append(list(view.findings))
                if until(history[-1]):
                    break
                await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - began)))
        if load.done():
            result = await load
            assert result.errors == 0, result.error_samples
        else:  # the verdict came early: the clients have done their part
            load.cancel()
            await asyncio.gather(load, return_exceptions=True)
    finally:
        local.close()
    return history


def firing(findings: list[Finding]) -> dict[str, Finding]:
    return {f.rule: f for f in findings if f.firing}


def raises_max_num_seqs(findings: list[Finding]) -> bool:
    return any(r.knob == "max_num_seqs" and r.direction == "raise"
               for f in findings for r in f.recommendations)  # fmt: skip


def test_kv_exhausted_server_is_memory_ceiling_never_a_raise(kv_exhausted_run: KvRun) -> None:
    history = kv_exhausted_run.findings
    assert not any(raises_max_num_seqs(fs) for fs in history)
    assert not any("budget-too-small" in firing(fs) for fs in history)
    seen = [firing(fs) for fs in history[-20:]]
    assert any("memory-ceiling" in f for f in seen), [
        (f.rule, f.state, f.summary) for f in history[-1]
    ]
    mc = next(f["memory-ceiling"] for f in reversed(seen) if "memory-ceiling" in f)
    print(
        f"\nmemory-ceiling on the real server: {mc.summary} {[r.flag for r in mc.recommendations]}"
    )


async def test_budget_bound_server_is_told_a_higher_max_num_seqs(
    budget_server: VllmServer,
) -> None:
    shape = Shape(prompt_tokens=(16, 64), max_tokens=(64, 128))
    # The rule needs 120 polls and 3 minutes of server uptime, then 30 s of holding: it may
    # speak after ~150 s. The watch ends as soon as it does.
    history = await watch(budget_server.url, 240.0, 16, shape,
                          until=lambda fs: "budget-too-small" in firing(fs))  # fmt: skip
    final = firing(history[-1])
    assert "budget-too-small" in final, [(f.rule, f.state, f.summary) for f in history[-1]]
    rec = next(r for r in final["budget-too-small"].recommendations if r.knob == "max_num_seqs")
    assert rec.direction == "raise"
    assert isinstance(rec.new_value, int) and rec.new_value > 4
    assert rec.current is not None and rec.current.provenance == "process"
    print(f"\nbudget-too-small on the real server: {rec.flag} ({rec.formula}; inputs "
          f"{ {k: getattr(v, 'value', v) for k, v in rec.inputs.items()} })")  # fmt: skip
