"""max_num_seqs read from behaviour (`inferred`) when no metric, process or flag states it.

A remote server shows no process to read, and no metric carries max_num_seqs: vtop then
starts from a version default. A simulated server (the `vtop sim` twin, warmed up, on a real
socket) whose batch is pinned at its cap while requests queue and KV has room must be read as
that cap, marked `inferred`; one whose queue is the KV pool's wall (memory-ceiling) must not.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from vtop.model import Knob, Provenance
from vtop.monitor import Monitor
from vtop.sim.server import serve
from vtop.sim.twin import Twin
from vtop.sources import discovery
from vtop.sources.live import LiveSource

POLLS = 30
SPEED = 20.0
"""Virtual seconds per wall second: POLLS polls 0.05 s apart watch half a simulated minute."""


def watch(scenario: str, flags: Mapping[str, Knob] | None = None) -> Knob:
    """max_num_seqs as the monitor holds it after POLLS polls of a remote-looking endpoint."""
    twin = Twin(scenario)
    twin.warm_up()

    async def run(url: str) -> Knob:
        source = LiveSource([url], flags=flags, process_probe=None)  # no process to read
        monitor = Monitor(capacity=POLLS)
        try:
            for _ in range(POLLS):
                monitor.feed(await source.poll())
                await asyncio.sleep(0.05)
        finally:
            await source.aclose()
        (view,) = monitor.endpoints.values()
        return view.knobs["max_num_seqs"]

    with serve(twin, speed=SPEED) as srv:
        return asyncio.run(run(srv.url))


def test_a_batch_pinned_at_its_cap_while_requests_wait_gives_the_cap_inferred() -> None:
    knob = watch("budget-too-small")  # the scenario's server runs --max-num-seqs 16
    assert (knob.value, knob.provenance) == (16, "inferred"), knob
    assert knob.assumed and "running held at 16 while requests waited" in knob.detail


def test_a_queue_behind_a_full_kv_pool_infers_nothing() -> None:
    knob = watch("memory-ceiling")
    assert knob.provenance == "default", knob


def test_a_flag_beats_the_inference() -> None:
    knob = watch("budget-too-small", discovery.flag_knobs(24, None))
    assert (knob.value, knob.provenance) == (24, "flag")


def test_inferred_beats_default_and_loses_to_what_is_stated() -> None:
    running: list[float | None] = [16.0] * 12
    waiting: list[float | None] = [4.0] * 12
    roomy: list[float | None] = [0.3] * 12
    default = {"max_num_seqs": Knob("max_num_seqs", 256, "default", "vLLM default")}
    got = discovery.with_inferred_max_num_seqs(default, running, waiting, roomy)
    assert (got["max_num_seqs"].value, got["max_num_seqs"].provenance) == (16, "inferred")
    stating: tuple[Provenance, ...] = ("metrics", "process", "flag")
    for provenance in stating:
        stated = {"max_num_seqs": Knob("max_num_seqs", 64, provenance, "stated")}
        assert discovery.with_inferred_max_num_seqs(stated, running, waiting, roomy) == stated
    full: list[float | None] = [0.97] * 12
    assert discovery.with_inferred_max_num_seqs(default, running, waiting, full) == default
    unknown_kv: list[float | None] = [None] * 12
    assert discovery.with_inferred_max_num_seqs(default, running, waiting, unknown_kv) == default
