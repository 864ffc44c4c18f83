"""The step-time fit: known steps in, the law's coefficients (or the prior's scale) out, and
step points read from a store whose steps are known."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.simtools.polled import polled
from vtop.model import Finding, Histogram, Recommendation, Scrape, SeriesKey, Severity
from vtop.signals.store import Store
from vtop.sim.calibration import StepPoint
from vtop.sim.calibration import predict as predict_step
from vtop.sim.hardware import CPU_ENGINE, QWEN_4090_AWQ, QWEN_4090_BF16, FittedStepTime
from vtop.sim.scenarios import get_scenario
from vtop.sim.twin import Twin
from vtop.whatif.advice import Advisor
from vtop.whatif.check import figures
from vtop.whatif.fit import (
    fit,
    flatter_than_prior,
    prior_preset,
    prior_step_s,
    scaled,
    step_points,
)
from vtop.whatif.predict import WhatIf, observe, prepare, prepare_from
from vtop.whatif.watched import Watched

LAW = FittedStepTime(base_s=0.012, per_token_s=0.0009, per_seq_s=0.0003)


def points_of(law: FittedStepTime, batches: list[tuple[float, float]]) -> list[StepPoint]:
    out = []
    for tokens, seqs in batches:
        p = StepPoint(f"{tokens:.0f}", tokens, seqs, 100.0 * seqs, 0.0)
        out.append(StepPoint(p.label, tokens, seqs, p.context, predict_step(law, p)))
    return out


def test_spread_points_give_the_law_back() -> None:
    pts = points_of(LAW, [(1, 1), (4, 4), (16, 12), (64, 16), (512, 8)])
    result = fit(pts, CPU_ENGINE, "cpu")
    assert result.grade == "fitted"
    law = result.preset.fitted
    assert law is not None
    assert law.base_s == pytest.approx(LAW.base_s, rel=1e-6)
    assert law.per_token_s == pytest.approx(LAW.per_token_s, rel=1e-6)
    assert law.per_seq_s == pytest.approx(LAW.per_seq_s, rel=1e-6)


def test_points_at_one_batch_scale_the_prior() -> None:
    slower = scaled(CPU_ENGINE, 1.5).fitted
    assert slower is not None
    pts = points_of(slower, [(16, 16), (17, 16), (18, 16)])
    result = fit(pts, CPU_ENGINE, "cpu")
    assert result.grade == "scaled prior"
    assert result.scale == pytest.approx(1.5, rel=1e-6)
    for p in pts:
        assert prior_step_s(result.preset, p) == pytest.approx(p.step_s, rel=1e-6)


def test_a_roofline_prior_scales_every_step_alike() -> None:
    p = StepPoint("decode", 16.0, 16.0, 10_000.0, 0.0)
    q = StepPoint("prefill", 600.0, 1.0, 600.0, 0.0)
    pts = [StepPoint("x", 16.0, 16.0, 10_000.0, 2 * prior_step_s(QWEN_4090_AWQ, p))]
    result = fit(pts, QWEN_4090_AWQ, "4090")
    assert result.scale == pytest.approx(2.0, rel=1e-6)
    assert prior_step_s(result.preset, q) == pytest.approx(2 * prior_step_s(QWEN_4090_AWQ, q))


def test_a_mix_of_decode_and_prefill_steps_costs_more_than_their_average_step() -> None:
    avg = StepPoint("mix", 56.0, 16.0, 10_000.0, 0.0)
    assert prior_step_s(QWEN_4090_AWQ, avg, prefill_chunk=600.0) > 1.2 * prior_step_s(
        QWEN_4090_AWQ, avg
    )


def test_no_points_leave_the_prior() -> None:
    result = fit([], QWEN_4090_AWQ, "4090")
    assert (result.grade, result.preset, result.scale) == ("prior", QWEN_4090_AWQ, 1.0)


def test_the_prior_follows_the_gpu_and_the_model() -> None:
    assert prior_preset(None, "vtop/engine")[0] is CPU_ENGINE
    gpu = "NVIDIA GeForce RTX 4090"
    assert prior_preset(gpu, "Qwen/Qwen2.5-7B-Instruct-AWQ")[0] is QWEN_4090_AWQ
    assert prior_preset(gpu, "Qwen/Qwen2.5-7B-Instruct", "none")[0] is QWEN_4090_BF16
    awq = ("chat", "Qwen/Qwen2.5-7B-Instruct-AWQ")  # any of the names it is served under
    assert prior_preset(gpu, awq) == (QWEN_4090_AWQ, f"{QWEN_4090_AWQ.name} (same GPU and model)")
    preset, why = prior_preset("NVIDIA A10", "x")
    assert preset is QWEN_4090_AWQ and "assumed" in why


def k(signal: str) -> SeriesKey:
    return SeriesKey(signal, "m", "0", "")


def test_step_points_read_the_steps_a_store_saw() -> None:
    """50 steps of 20 tokens a second for 16 requests, KV a quarter of 8,000 tokens: every
    30-second chunk is a 20 ms step of 20 tokens, 16 requests and 2,000 context tokens."""
    store = Store("http://127.0.0.1:8000")
    bounds = (8.0, 16.0, 32.0, 64.0)
    for i in range(121):
        steps = 50.0 * i
        h = Histogram(bounds, (0.0, 0.0, steps, steps), steps, 20.0 * steps)
        scalars = {k("running"): 16.0, k("waiting"): 0.0, k("kv_usage"): 0.25}
        store.ingest(
            Scrape(
                "ep",
                float(i),
                latency_s=0.01,
                scalars=scalars,
                histograms={k("iteration_tokens"): h},
            )
        )
    pts = step_points(store, 120.0, kv_capacity_tokens=8000.0)
    assert len(pts) == 4
    for p in pts:
        assert (p.tokens, p.seqs, p.context) == pytest.approx((20.0, 16.0, 2000.0))
        assert p.step_s == pytest.approx(0.02)


# --- one server seen at two configurations: the law fitted to both ---------------------------

TRUE_LAW = FittedStepTime(base_s=0.030, per_token_s=0.0020, per_seq_s=0.0)
"""A server whose steps follow a law far from its prior's roofline: what vtop cannot know."""
POOL_WINDOW_S = 240.0


def _server(seats: int) -> Watched:
    scenario = get_scenario("budget-too-small")
    scenario = replace(
        scenario,
        preset=replace(scenario.preset, fitted=TRUE_LAW),
        args=replace(scenario.args, max_num_seqs=seats),
    )
    twin = Twin(scenario, seed=3, epoch=0.0)
    twin.warm_up()
    return polled(twin, POOL_WINDOW_S)


def _tokens(whatif: WhatIf, seats: int) -> float:
    band = whatif.predict({"max_num_seqs": seats}).figures["generation_tokens_per_s"]
    return band.after


def test_a_server_seen_at_two_configurations_has_its_own_law_fitted() -> None:
    alone = prepare(_server(4), POOL_WINDOW_S)
    assert alone.step.grade == "scaled prior"  # one batch size: the prior's shape, scaled
    earlier = alone.step.window_points()
    both = prepare_from(observe(_server(16), POOL_WINDOW_S), earlier=earlier)
    assert both.step.earlier == len(earlier) > 0
    assert both.step.grade == "fitted"
    assert "at other configurations of this server" in both.step.describe()
    law = both.step.preset.fitted
    assert law is not None
    assert law.per_token_s == pytest.approx(TRUE_LAW.per_token_s, rel=0.25)
    # a third configuration, neither seen: the pooled law predicts it, the lone one does not
    truth = figures(_server(32).store, POOL_WINDOW_S)["generation_tokens_per_s"]
    assert truth is not None
    pooled_error = abs(_tokens(both, 32) / truth - 1)
    alone_error = abs(_tokens(alone, 32) / truth - 1)
    assert pooled_error < 0.10, (pooled_error, alone_error)
    assert pooled_error < alone_error


def _cpu_server(seats: int, law: FittedStepTime) -> Watched:
    """The budget-bound scenario on the CPU build whose steps follow `law`."""
    scenario = get_scenario("budget-too-small")
    scenario = replace(
        scenario,
        preset=replace(CPU_ENGINE, fitted=law),
        args=replace(scenario.args, max_num_seqs=seats),
    )
    twin = Twin(scenario, seed=3, epoch=0.0)
    twin.warm_up()
    return polled(twin, POOL_WINDOW_S)


def test_a_law_flat_where_it_was_seen_does_not_replace_the_priors_shape() -> None:
    # Steps that cost the same at 4 and 12 seats (a CPU below its knee): a law fitted to them
    # would promise as much again at every width. The prior's shape stands, scaled.
    flat = FittedStepTime(base_s=0.020, per_token_s=0.00001, per_seq_s=0.0)
    alone = prepare(_cpu_server(4, flat), POOL_WINDOW_S)
    earlier = alone.step.window_points()
    both = prepare_from(observe(_cpu_server(12, flat), POOL_WINDOW_S), earlier=earlier)
    assert both.step.earlier == 0 and both.step.grade == "scaled prior", both.step.describe()
    assert flatter_than_prior(replace(CPU_ENGINE, fitted=flat), CPU_ENGINE, list(both.step.points))
    # a law as steep as the prior's (the test above's, near the CPU build's): pooled
    steep = replace(CPU_ENGINE, fitted=TRUE_LAW)
    assert not flatter_than_prior(steep, CPU_ENGINE, list(both.step.points))


def test_the_advisor_pools_a_servers_configurations_and_nothing_else() -> None:
    advisor = Advisor()
    finding = Finding(
        rule="budget-too-small",
        title="Budget too small",
        endpoint="",
        severity=Severity.WARNING,
        state="firing",
        summary="the batch is at its cap",
        recommendations=(Recommendation("max_num_seqs", None, 32, "raise", "demand", {}),),
    )
    first = _server(4)
    reading = advisor.read(first, POOL_WINDOW_S)
    advisor.advise(replace(finding, endpoint=first.store.endpoint), reading)
    fitted = advisor.fitted(first.store.endpoint)
    assert fitted is not None and fitted.step.earlier == 0
    second = _server(16)  # the same endpoint, restarted with another max_num_seqs
    reading = advisor.read(second, POOL_WINDOW_S)
    advisor.advise(replace(finding, endpoint=second.store.endpoint), reading)
    fitted = advisor.fitted(second.store.endpoint)
    assert fitted is not None and fitted.step.earlier > 0
