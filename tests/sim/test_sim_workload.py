"""Workloads: arrival processes, length distributions, finish reasons, reproducibility."""

from __future__ import annotations

import random

from vtop.sim.scheduler import Request
from vtop.sim.workload import Clients, ClosedLoop, Lengths, Poisson, Shape, Waves

CHAT = Shape(Lengths(500, 0.6, lo=10, hi=4000), Lengths(200, 0.7, lo=1, hi=1000), max_tokens=300)


def drain(clients: Clients, until: float) -> list[Request]:
    out: list[Request] = []
    clients.pop_due(until, out)
    return out


def test_poisson_rate_and_bursts_keep_the_mean() -> None:
    for burst in (1.0, 3.0):
        c = Clients(
            Poisson(
                rate=5.0, shapes=(CHAT,), burst_factor=burst, burst_period_s=60, burst_duty=0.2
            ),
            seed=1,
            max_model_len=32768,
            block_size=16,
        )
        reqs = drain(c, 1200.0)
        assert 0.93 * 6000 < len(reqs) < 1.07 * 6000
        sends = [r.arrival_ts for r in reqs]
        assert sends == sorted(sends)
        if burst > 1:
            in_burst = sum(1 for t in sends if t % 60 < 12)
            assert in_burst / len(sends) > 0.5  # 60% of arrivals in 20% of the time


def test_closed_loop_keeps_n_in_flight() -> None:
    c = Clients(ClosedLoop(clients=8, shapes=(CHAT,)), seed=2, max_model_len=32768, block_size=16)
    first = drain(c, 0.0)
    assert len(first) == 8 and drain(c, 100.0) == []
    c.on_done(first[3], 5.0)
    again = drain(c, 5.0)
    assert len(again) == 1 and again[0].client == first[3].client and again[0].arrival_ts == 5.0


def test_waves_wait_for_the_whole_wave() -> None:
    c = Clients(
        Waves(wave_size=4, shapes=(CHAT,), gap_s=1.0), seed=3, max_model_len=32768, block_size=16
    )
    wave = drain(c, 0.0)
    assert len(wave) == 4
    for r in wave[:3]:
        c.on_done(r, 10.0)
    assert drain(c, 100.0) == []
    c.on_done(wave[3], 20.0)
    assert drain(c, 20.9) == [] and len(drain(c, 21.0)) == 4


def test_lengths_clamp_and_mean() -> None:
    rng = random.Random(0)
    d = Lengths(300, 0.8, lo=10, hi=2000)
    xs = [d.sample(rng) for _ in range(20000)]
    assert min(xs) >= 10 and max(xs) <= 2000
    assert 270 < sum(xs) / len(xs) < 320
    assert Lengths(42).sample(rng) == 42


def test_finish_reasons_follow_max_tokens() -> None:
    c = Clients(Poisson(rate=50, shapes=(CHAT,)), seed=4, max_model_len=32768, block_size=16)
    reqs = drain(c, 100.0)
    for r in reqs:
        assert r.output_len <= 300 and r.max_tokens == 300
        assert r.finish_reason == ("length" if r.output_len == 300 else "stop")
    share = sum(r.finish_reason == "length" for r in reqs) / len(reqs)
    assert 0.05 < share < 0.35  # lognormal tail above 300 for a mean of 200


def test_prefix_groups_and_prompt_floor() -> None:
    shape = Shape(Lengths(100), Lengths(10), prefix_len=1000, prefix_groups=3)
    c = Clients(Poisson(rate=20, shapes=(shape,)), seed=5, max_model_len=32768, block_size=16)
    reqs = drain(c, 50.0)
    assert all(r.prompt_len == 1001 and r.prefix_blocks == 62 for r in reqs)
    assert len({r.prefix_key for r in reqs}) == 3


def test_same_seed_same_requests() -> None:
    def make(seed: int) -> list[tuple[float, int, int]]:
        c = Clients(Poisson(rate=3, shapes=(CHAT,)), seed=seed, max_model_len=32768, block_size=16)
        return [(r.arrival_ts, r.prompt_len, r.output_len) for r in drain(c, 100.0)]

    assert make(9) == make(9) != make(10)


def test_prefix_share_is_a_share_of_each_prompt() -> None:
    shape = Shape(Lengths(1000, 0.3), Lengths(10), prefix_share=0.5, prefix_groups=1)
    c = Clients(Poisson(rate=20, shapes=(shape,)), seed=6, max_model_len=32768, block_size=16)
    reqs = drain(c, 20.0)
    assert all(r.prefix_blocks == (r.prompt_len // 2) // 16 for r in reqs)
    assert len({r.prefix_blocks for r in reqs}) > 5
