"""Every scenario shows its symptom in numbers, and the stated fix removes it.

Each scenario is run past its warm-up and observed for a minute the way a scraper would see it
(gauges sampled every second, counters and histograms by their deltas). The thresholds are the
ones reference/triage.md's rules look at; where a scenario names a fix, applying it to the same
load must make the symptom go away, which is what makes the stated cause the cause.
"""

from __future__ import annotations

import dataclasses
from functools import cache

import pytest

from tests.sim.helpers import with_knobs
from tests.simtools.probe import Window, measure
from vtop.knobs import KnobValue
from vtop.sim.scenarios import SCENARIOS, Scenario, get_scenario
from vtop.sim.serve_args import ServeArgs
from vtop.sim.twin import Twin

WINDOW_S = 60.0


@cache
def window(name: str) -> Window:
    twin = Twin(name)
    twin.warm_up()
    return measure(twin, WINDOW_S, 1.0, scrape=True)


def with_args(sc: Scenario, **changes: KnobValue) -> Scenario:
    return dataclasses.replace(sc, args=with_knobs(sc.args, changes))


def run(sc: Scenario, *, keep: bool = False) -> tuple[Twin, Window]:
    twin = Twin(sc, keep_finished=keep)
    twin.warm_up()
    return twin, measure(twin, WINDOW_S, 1.0)


def cap(name: str) -> int:
    return Twin(name).resolved.max_num_seqs


def test_every_scenario_states_cause_rule_and_symptom() -> None:
    assert set(SCENARIOS) == {
        "healthy",
        "memory-ceiling",
        "budget-too-small",
        "prefill-budget-bound",
        "past-sweet-spot",
        "client-static-batching",
        "long-prompt-starvation",
        "ttft-queueing",
        "prefix-cache-ineffective",
        "underloaded",
        "frontend-bound",
    }
    for sc in SCENARIOS.values():
        assert len(sc.cause) > 150 and sc.symptom and sc.title
        assert sc.rule == (None if sc.name == "healthy" else sc.name)
    with pytest.raises(KeyError, match="known: healthy"):
        get_scenario("nope")


def test_healthy() -> None:
    w = window("healthy")
    assert w.waiting_mean < 0.5 and w.preemptions_per_s == 0
    assert w.kv_max < 0.5 and 5 < w.running_mean < cap("healthy") / 2
    assert w.requests_per_s > 3


def test_memory_ceiling() -> None:
    w = window("memory-ceiling")
    assert w.kv_mean > 0.9 and w.kv_max >= 0.99
    assert w.preemptions_per_s > 0.1
    assert w.waiting_mean > 10
    assert w.running_max < cap("memory-ceiling") / 2
    # The fix: AWQ weights (or an FP8 KV cache) leave room for every conversation.
    sc = get_scenario("memory-ceiling")
    from vtop.sim.hardware import QWEN_4090_AWQ

    _, fixed = run(dataclasses.replace(sc, preset=QWEN_4090_AWQ))
    assert fixed.preemptions_per_s == 0 and fixed.kv_max < 0.9 and fixed.waiting_mean < 2


def test_budget_too_small() -> None:
    w = window("budget-too-small")
    assert w.running_mean >= 0.95 * 16 and w.running_max == 16
    assert w.waiting_mean > 20
    assert w.kv_max < 0.2 and w.preemptions_per_s == 0
    _, fixed = run(with_args(get_scenario("budget-too-small"), max_num_seqs=128))
    assert fixed.waiting_mean < 1 and fixed.requests_per_s > 1.3 * w.requests_per_s


def test_prefill_budget_bound() -> None:
    w = window("prefill-budget-bound")
    budget = Twin("prefill-budget-bound").resolved.max_num_batched_tokens
    assert w.waiting_mean > 20
    assert w.running_max < cap("prefill-budget-bound") / 2
    assert w.kv_max < 0.5
    assert w.tokens_per_step >= 0.9 * budget
    _, fixed = run(with_args(get_scenario("prefill-budget-bound"), max_num_batched_tokens=8192))
    assert fixed.waiting_mean < 0.2 * w.waiting_mean
    assert fixed.requests_per_s > 1.1 * w.requests_per_s


def test_past_sweet_spot() -> None:
    w = window("past-sweet-spot")
    assert w.preemptions_per_s > 0.1
    assert w.running_mean >= 0.9 * cap("past-sweet-spot")
    assert w.waiting_mean < 5 and w.kv_max >= 0.99
    _, fixed = run(with_args(get_scenario("past-sweet-spot"), max_num_seqs=96))
    assert fixed.preemptions_per_s == 0 and fixed.kv_max < 0.95


def test_client_static_batching() -> None:
    w = window("client-static-batching")
    assert w.running_max >= 24
    assert w.running_mean < 0.4 * 32
    assert w.idle_share > 0.02  # the batch drains to 0 between waves


def _short_ttft_p90(sc: Scenario) -> tuple[float, float]:
    twin = Twin(sc, keep_finished=True)
    twin.advance(sc.warmup_s)
    log = twin.engine.log
    assert log is not None
    start = len(log.rows)
    twin.advance(120.0)
    short = sorted(r[2] for r in log.rows[start:] if r[0] == 0)
    return short[len(short) // 2], short[int(0.9 * len(short))]


def test_long_prompt_starvation() -> None:
    sc = get_scenario("long-prompt-starvation")
    p50, p90 = _short_ttft_p90(sc)
    assert p50 < 0.2 and p90 > 5 * p50 and p90 > 0.5
    _, p90_fixed = _short_ttft_p90(with_args(sc, long_prefill_token_threshold=512))
    assert p90_fixed < p90 / 3


def test_ttft_queueing() -> None:
    w = window("ttft-queueing")
    assert w.queue_share_of_ttft > 0.7
    assert w.ttft_mean_s > 1.0 and w.prefill_mean_s < 0.1 * w.ttft_mean_s
    assert w.waiting_max > 10


def test_prefix_cache_ineffective() -> None:
    w = window("prefix-cache-ineffective")
    twin = Twin("prefix-cache-ineffective")
    assert twin.knobs["enable_prefix_caching"] is False
    assert "--no-enable-prefix-caching" in twin.command_line
    assert w.prefix_hit_rate == 0
    assert w.prompt_tps > 5 * w.generation_tps
    _, fixed = run(with_args(get_scenario("prefix-cache-ineffective"), enable_prefix_caching=True))
    assert fixed.prefix_hit_rate > 0.8
    assert fixed.ttft_mean_s < 0.5 * w.ttft_mean_s


def test_underloaded() -> None:
    w = window("underloaded")
    assert w.running_max <= 2 and w.waiting_max == 0 and w.kv_max < 0.02


def test_frontend_bound() -> None:
    w = window("frontend-bound")
    assert w.idle_share > 0.7  # scrapes read running = waiting = 0 ...
    assert w.in_flight_mean > 30  # ... while clients have requests in flight
    assert w.requests_per_s > 5 and w.generation_tps > 100  # and counters climb
    assert w.scrape_delay_mean_s > 0.3 and w.scrape_delay_max_s > 1.0
    assert w.gpu_util_mean < 0.4
    # More API-server capacity, not scheduler knobs, is what helps.
    sc = get_scenario("frontend-bound")
    _, more_seqs = run(with_args(sc, max_num_seqs=1024, max_num_batched_tokens=8192))
    assert more_seqs.requests_per_s < 1.1 * w.requests_per_s
    faster = dataclasses.replace(sc, frontend=dataclasses.replace(sc.frontend, api_server_count=4))
    _, fixed = run(faster)
    assert fixed.requests_per_s > 2 * w.requests_per_s


def test_serve_args_unchanged_by_scenarios() -> None:
    """Scenarios only set what they mean to: defaults stay vLLM's."""
    assert get_scenario("healthy").args == ServeArgs()
