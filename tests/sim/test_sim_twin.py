"""The in-process Twin API: time, determinism, GPU readings, knobs and command line."""

from __future__ import annotations

import dataclasses
import itertools
import random

import pytest

from vtop.model import EndpointInfo
from vtop.sim.engine import Engine
from vtop.sim.scenarios import SCENARIOS, get_scenario
from vtop.sim.twin import Twin


def fingerprint(twin: Twin) -> tuple[object, ...]:
    st = twin.engine.stats
    hists = tuple((name, h.count, round(h.sum, 6)) for name, h in sorted(st.hists.items()))
    return (
        st.generation_tokens,
        st.prompt_tokens,
        st.preemptions,
        st.prefix_queries,
        st.running,
        st.waiting,
        round(st.kv_usage, 9),
        hists,
    )


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_chunking_advance_changes_nothing(name: str) -> None:
    whole = Twin(name, seed=3)
    whole.advance(40.0)
    pieces = Twin(name, seed=3)
    for _ in range(160):
        pieces.advance(0.25)
    odd = Twin(name, seed=3)
    rng = random.Random(name)
    left = 40.0
    while left > 1e-9:
        dt = min(left, rng.choice((0.001, 0.013, 0.3, 1.7, 5.0)))
        odd.advance(dt)
        left -= dt
    assert whole.now == pytest.approx(40.0)
    assert fingerprint(whole) == fingerprint(pieces) == fingerprint(odd)


def test_same_seed_same_run_other_seed_other_run() -> None:
    a, b, c = (Twin("healthy", seed=s, epoch=0.0) for s in (1, 1, 2))
    for t in (a, b, c):
        t.advance(30)
    assert fingerprint(a) == fingerprint(b) != fingerprint(c)
    pa = a.metrics_text(process_metrics=False)
    pb = b.metrics_text(process_metrics=False)
    assert pa == pb


def test_macro_steps_do_not_change_the_engine() -> None:
    """Decode runs taken at once count exactly what single steps count."""
    sc = get_scenario("past-sweet-spot")
    zero = dataclasses.replace(sc, frontend=dataclasses.replace(sc.frontend, per_request_s=0.0))
    fast = Twin(zero, seed=5)
    slow = Twin(zero, seed=5)
    slow.engine.macro_steps = False
    for t in (fast, slow):
        t.advance(60)
    f, s = fast.engine.stats, slow.engine.stats
    assert f.generation_tokens == s.generation_tokens
    assert f.preemptions == s.preemptions
    assert f.hist("itl").count == s.hist("itl").count
    assert f.hist("itl").sum == pytest.approx(s.hist("itl").sum, rel=1e-9)
    assert f.hist("e2e").sum == pytest.approx(s.hist("e2e").sum, rel=1e-6)
    assert fast.engine.t == pytest.approx(slow.engine.t, abs=0.2)


def test_negative_advance_is_refused() -> None:
    with pytest.raises(ValueError, match="negative"):
        Twin("healthy").advance(-1)


def test_gpu_reads_like_nvml() -> None:
    idle = Twin("underloaded")
    st = idle.gpu_status()
    (g,) = st.gpus
    assert g.name == "NVIDIA GeForce RTX 4090" and g.util_pct == 0 and g.sm_clock_mhz == 210
    assert g.mem_total_bytes is not None and g.mem_used_bytes is not None
    # vLLM preallocates: used memory ~ total x gpu_memory_utilization, load or not.
    assert g.mem_used_bytes == pytest.approx(0.92 * g.mem_total_bytes, rel=0.05)
    busy = Twin("memory-ceiling")
    cold = busy.gpu_status().gpus[0]
    t0 = cold.temp_c or 0.0
    busy.advance(300)
    hot = busy.gpu_status().gpus[0]
    assert hot.util_pct is not None and 60 < hot.util_pct <= 100
    assert (hot.temp_c or 0.0) > t0 + 15  # first-order lag toward the loaded temperature
    assert (hot.power_w or 0.0) > 250 and (hot.sm_clock_mhz or 0.0) > 2000
    assert hot.mem_used_bytes == cold.mem_used_bytes  # preallocated: flat under load


def test_endpoint_info_knobs_and_command_line() -> None:
    twin = Twin("budget-too-small", emulate_version="0.10")
    assert twin.endpoint_info() == EndpointInfo(
        version="0.10.1.1", models=("Qwen/Qwen2.5-7B-Instruct-AWQ",), max_model_len=32768
    )
    k = twin.knobs
    assert k["max_num_seqs"] == 16 and k["max_num_batched_tokens"] == 2048
    assert k["gpu_memory_utilization"] == 0.92 and k["block_size"] == 16
    assert k["enable_prefix_caching"] is True and k["kv_cache_dtype"] == "auto"
    assert k["tensor_parallel_size"] == 1 and k["quantization"] == "awq_marlin"
    argv = twin.command_line
    assert argv[:3] == ["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct-AWQ"]
    joined = " ".join(argv)
    assert "--max-num-seqs 16" in joined and "--quantization awq_marlin" in joined
    assert "--gpu-memory-utilization 0.92" in joined
    assert all(isinstance(v, int | float | str | bool) for v in k.values())


def test_engine_clock_never_lags_the_twin() -> None:
    twin = Twin("healthy")
    for _ in range(50):
        twin.advance(0.37)
        assert isinstance(twin.engine, Engine)
        assert twin.engine.t >= twin.now - 1e-9


def test_real_time_maps_wall_seconds_times_speed() -> None:
    from vtop.sim.clock import RealTime

    wall = [100.0]
    twin = Twin("healthy")
    clock = RealTime(twin, speed=30.0, clock=lambda: wall[0])
    wall[0] += 0.5
    clock.sync()
    assert twin.now == pytest.approx(15.0)
    clock.sync()  # no wall time passed: no virtual time either
    assert twin.now == pytest.approx(15.0)
    assert clock.wall_seconds(3.0) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="positive"):
        RealTime(twin, speed=0)


def page_reading(page: bytes) -> tuple[float, float, float]:
    """(running, waiting, generation tokens) as the /metrics page says them."""
    values: dict[str, float] = {}
    for line in page.decode().splitlines():
        name = line.split("{", 1)[0]
        if name in (
            "vllm:num_requests_running",
            "vllm:num_requests_waiting",
            "vllm:generation_tokens_total",
        ):
            values[name] = float(line.rsplit(" ", 1)[1])
    return (
        values["vllm:num_requests_running"],
        values["vllm:num_requests_waiting"],
        values["vllm:generation_tokens_total"],
    )


def polled(
    twin: Twin, polls: int, *, live: bool, chunk_s: float | None = None
) -> list[tuple[float, float, tuple[float, float, float]]]:
    """(poll start, answer time, page reading) per poll of the twin's /metrics.

    `live`: vtop's live cadence (a poll a second from the previous one's start, at once when
    that answer came later), else the demo's (a second after the answer). `chunk_s`: time
    moves in steps of that many seconds while the answer is awaited, as the sim server's
    driver thread moves it, instead of `Twin.scrape` running straight to the answer."""
    out = []
    for _ in range(polls):
        start = twin.now
        if chunk_s is None:
            delay, page = twin.scrape()
            answer = (start + delay, page)
        else:
            ticket = twin.request_metrics()
            while (got := twin.answer(ticket)) is None:
                twin.advance(chunk_s)
            answer = got
        out.append((start, answer[0], page_reading(answer[1])))
        twin.advance(max(0.0, (start if live else answer[0]) + 1.0 - twin.now))
    return out


@pytest.mark.parametrize("name", ["frontend-bound", "budget-too-small"])
def test_a_scrape_reads_the_same_page_however_time_is_chunked(name: str) -> None:
    """The sim server moves time in driver ticks while a /metrics answer is awaited, the demo
    runs straight to it: the page is the one the API server answered with, either way."""
    straight = Twin(name, seed=1, epoch=0.0)
    straight.warm_up()
    ticked = Twin(name, seed=1, epoch=0.0)
    ticked.warm_up()
    a = polled(straight, 25, live=False)
    b = polled(ticked, 25, live=False, chunk_s=0.05)
    assert [(round(s, 9), round(t, 9), r) for s, t, r in a] == [
        (round(s, 9), round(t, 9), r) for s, t, r in b
    ]


@pytest.mark.parametrize("live", [True, False], ids=["live-cadence", "demo-cadence"])
def test_frontend_bound_reads_a_stale_empty_engine_at_any_cadence(live: bool) -> None:
    """The real starved API server: most polls read running = waiting = 0, as did the poll
    before, while the token counters climb, and /metrics answers late. A page rendered before
    the loop's answer read the engine mid-burst on every other poll at vtop's live cadence."""
    twin = Twin("frontend-bound", seed=0, epoch=0.0)
    twin.warm_up()
    polls = polled(twin, 40, live=live)
    stale = sum(
        1
        for (_, _, (r0, w0, g0)), (_, _, (r1, w1, g1)) in itertools.pairwise(polls)
        if r0 == w0 == r1 == w1 == 0 and g1 > g0
    )
    assert stale >= 0.6 * (len(polls) - 1)  # 57% on the real capture; 3% read mid-cycle
    latencies = sorted(t - s for s, t, _ in polls)
    assert latencies[len(latencies) // 2] >= 0.5
    assert polls[-1][2][2] - polls[0][2][2] > 300 * (polls[-1][1] - polls[0][1])
