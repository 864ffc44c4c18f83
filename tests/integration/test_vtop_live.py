"""vtop's whole live data path against a real vLLM server: KV exhaustion, and a restart.

The same runs a user would see: LiveSource polls the real server once a second through the
scraper, parser, catalog and store while 40 clients exhaust its 24-block KV pool; discovery
finds the server's process on this host and reads `--max-num-seqs` from its command line. Then
the server is stopped and started again under vtop's eyes with another `--max-num-seqs`, as a
user applying advice restarts it (issue 8's real-server fault).
"""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest

from tests.integration.kv_run import KvRun
from tests.integration.servers import BUDGET, ENGINE_KV, ROOMY, ServerPool
from tools.vllm_cpu.load import Shape, closed_loop
from tools.vllm_cpu.server import VllmServer
from vtop.monitor import EndpointView, Monitor
from vtop.sources.live import LiveSource
from vtop.sources.local import LocalHost
from vtop.sources.vllm import ScrapeOptions
from vtop.triage.engine import Engine

pytestmark = pytest.mark.integration


@pytest.mark.vllm(ENGINE_KV)
def test_vtop_sees_kv_exhaustion_and_counts_every_token(kv_exhausted_run: KvRun) -> None:
    view = kv_exhausted_run.view
    assert view is not None
    store = view.store
    # On two cores, 40 clients can starve the API server past the 5 s timeout for a poll or
    # two (the API-server-bound regime): each such poll is counted and named, never more.
    errors = kv_exhausted_run.poll_errors
    assert store.failed_polls == len(errors) <= store.polls // 20, errors
    assert all(e.startswith("no answer from http") for e in errors), errors
    assert (store.max("waiting") or 0) > 0
    assert (store.max("kv_usage") or 0) >= 0.9
    assert (store.max("running") or 0) <= 16
    assert (store.increase("preemptions", 10_000) or 0) > 0
    generated = [v for v in store.values("generation_tokens") if v is not None]
    assert generated[-1] - generated[0] == kv_exhausted_run.load.completion_tokens
    knob = view.knobs["max_num_seqs"]
    assert (knob.value, knob.provenance) == (16, "process")
    assert view.knobs["kv_capacity_tokens"].value == 3072
    assert view.server.version == "0.32.0"


@pytest.mark.vllm(ROOMY, then=BUDGET)
async def test_vtop_rides_out_a_real_restart(server: VllmServer, vllm_pool: ServerPool) -> None:
    """The server is stopped and started again on its port while vtop polls it, with 4 seats
    where it had 16 (the roomy server the triage tests left running becomes the budget server
    the next test wants: no extra start-up). Every failed poll is one line naming the URL; the
    history from before stays; the counter reset is one `restart` event and never a negative
    rate; after it vtop reconnects by itself and reads the new process's knobs.
    """
    url = server.url
    local = LocalHost()
    source = LiveSource([url], ScrapeOptions(timeout_s=2.0), process_probe=local.process_knobs)
    monitor = Monitor(engine=Engine(Engine.from_catalog(user=False).rules))
    errors: list[str] = []
    short = Shape(prompt_tokens=(16, 64), max_tokens=(16, 48))

    async def poll() -> EndpointView:
        began = time.monotonic()
        frame = await source.poll()
        monitor.feed(frame)
        errors.extend(s.error for s in frame.scrapes if s.error)
        await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - began)))
        return monitor.endpoints[url]

    async def loaded(seconds: float) -> int:
        """Generated tokens of `seconds` of 4 clients, every request drained, polled at 1 Hz."""
        load = asyncio.create_task(
            closed_loop(url, concurrency=4, duration=seconds, shape=short, seed=21)
        )
        while not load.done():
            await poll()
        result = await load
        assert result.errors == 0, result.error_samples
        for _ in range(2):  # the last tokens reach the page
            await poll()
        return result.completion_tokens

    try:
        async with source:
            for _ in range(3):  # whatever the previous test left in flight settles
                view = await poll()
            settled = view.store.values("generation_tokens")[-1]
            before_tokens = await loaded(6.0)
            history = list(view.store.values("generation_tokens"))
            knob = view.knobs["max_num_seqs"]
            assert (knob.value, knob.provenance) == (16, "process")
            restart = asyncio.create_task(asyncio.to_thread(vllm_pool.restart_as, BUDGET))
            while not restart.done():
                await poll()
            await restart
            deadline = time.monotonic() + 45.0  # the back-off's longest wait is 30 s
            while source.status(url).text != "connected" and time.monotonic() < deadline:
                await poll()
            assert source.status(url).text == "connected", errors[-1:]
            after_tokens = await loaded(5.0)
    finally:
        local.close()

    store = view.store
    assert errors, "the restart was never seen"
    assert all("\n" not in e and url in e for e in errors), errors
    assert errors[0] in (
        f"cannot connect to {url}/metrics: connection refused",
        f"no answer from {url}/metrics within 2 s",
    ), errors[0]
    kinds = [e.kind for e in store.events]
    assert kinds.count("restart") == 1 and "disconnect" in kinds and "reconnect" in kinds, kinds
    assert kinds.index("disconnect") < kinds.index("reconnect") < kinds.index("restart")
    assert list(store.values("generation_tokens"))[: len(history)] == history
    known = [v for v in store.values("generation_tokens") if v is not None]
    assert all(b >= a for a, b in itertools.pairwise(known)), known
    # The reset-adjusted series: every token generated on both sides of the restart, counted once.
    assert settled is not None
    assert known[-1] - settled == before_tokens + after_tokens
    assert store.last("generation_tokens") == after_tokens  # what the new server's page says
    assert (store.rate("generation_tokens", 3600) or 0) > 0
    knob = view.knobs["max_num_seqs"]
    assert (knob.value, knob.provenance) == (4, "process")
