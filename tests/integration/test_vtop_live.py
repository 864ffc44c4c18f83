"""vtop's whole live data path against a real vLLM server whose KV cache runs out.

The same run a user would see: LiveSource polls the real server once a second through the
scraper, parser, catalog and store while 40 clients exhaust its 24-block KV pool; discovery
finds the server's process on this host and reads `--max-num-seqs` from its command line.
The token check is exact because the load generator lets requests in flight finish: every
token the engine generated reached a client in `usage.completion_tokens`.
"""

from __future__ import annotations

import asyncio

import pytest

from tools.vllm_cpu.load import Shape, closed_loop
from tools.vllm_cpu.server import VllmServer
from vtop.monitor import Monitor
from vtop.sources.live import LiveSource
from vtop.sources.local import LocalHost
from vtop.sources.vllm import ScrapeOptions

pytestmark = pytest.mark.integration

KV_HEAVY = Shape(prompt_tokens=(16, 128), max_tokens=(100, 400))


async def test_vtop_sees_kv_exhaustion_and_counts_every_token(engine_server: VllmServer) -> None:
    local = LocalHost()
    source = LiveSource(
        [engine_server.url],
        ScrapeOptions(timeout_s=5.0),
        gpu=local.gpu,
        host=local.host,
        process_probe=local.process_knobs,
    )
    monitor = Monitor()
    async with source:
        monitor.feed(await source.poll())
        load = asyncio.create_task(
            closed_loop(engine_server.url, concurrency=40, duration=20.0, shape=KV_HEAVY, seed=3)
        )
        while not load.done():
            monitor.feed(await source.poll())
            await asyncio.sleep(1.0)
        result = await load
        monitor.feed(await source.poll())
    local.close()

    (view,) = monitor.endpoints.values()
    store = view.store
    assert result.errors == 0, result.error_samples
    assert store.failed_polls == 0
    assert (store.max("waiting") or 0) > 0
    assert (store.max("kv_usage") or 0) >= 0.9
    assert (store.increase("preemptions", 10_000) or 0) > 0
    window = store.times()[-1] - store.times()[0] + 1
    generated = store.values("generation_tokens", window)
    first, last = generated[0], generated[-1]
    assert first is not None and last is not None
    assert last - first == result.completion_tokens
    knob = view.knobs["max_num_seqs"]
    assert (knob.value, knob.provenance) == (16, "process")
    assert view.knobs["kv_capacity_tokens"].value == 3072
    assert view.server.version == "0.32.0"
    assert (store.max("running") or 0) <= 16
