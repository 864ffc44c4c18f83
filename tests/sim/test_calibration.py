"""The `cpu-engine` preset against what was measured on the real vLLM CPU server, without one.

bench/calibrate.py measures the real engine and prints the points; `realcpu.MEASURED`
keeps them. These tests hold the preset to those points (the constants in hardware.py are the
fit of those points, and reproduce every one of them), check that the fit itself recovers a
known law, and that the twin built with the real server's arguments binds the wall each of the
three calibration configurations is about. tests/integration/test_calibration_real.py runs one
configuration on the real server itself.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.simtools.realcpu import (
    CONFIGS,
    FLOOR_TOKENS,
    MEASURED,
    SLOWHOST,
    PageSampler,
    binding_wall,
    real_args,
    real_twin,
    sample_twin,
    uniform_shapes,
)
from vtop.sim.calibration import StepPoint, fit_step_time, predict
from vtop.sim.hardware import CPU_ENGINE, CPU_ENGINE_NO_AVX512, PRESETS, FittedStepTime, StepCost
from vtop.sim.serve_args import resolve
from vtop.whatif.fit import prior_preset


def test_fit_recovers_a_known_law() -> None:
    law = FittedStepTime(
        base_s=0.012, per_token_s=0.0009, per_seq_s=0.0015, per_context_token_s=2e-6
    )
    shapes = [
        (1, 1, 100),
        (4, 4, 400),
        (16, 16, 1600),
        (4, 4, 2400),
        (2048, 6, 2048),
        (512, 2, 512),
    ]
    points = [StepPoint(f"p{i}", t, s, c, 0.0) for i, (t, s, c) in enumerate(shapes)]
    points = [StepPoint(p.label, p.tokens, p.seqs, p.context, predict(law, p)) for p in points]
    fit = fit_step_time(points)
    assert fit.base_s == pytest.approx(law.base_s, rel=1e-6)
    assert fit.per_token_s == pytest.approx(law.per_token_s, rel=1e-6)
    assert fit.per_seq_s == pytest.approx(law.per_seq_s, rel=1e-6)
    assert fit.per_context_token_s == pytest.approx(law.per_context_token_s, rel=1e-6)


def test_a_floor_fit_recovers_a_flat_bottom_and_the_line_above_it() -> None:
    line = FittedStepTime(base_s=0.011, per_token_s=0.0012, per_seq_s=0.0002)
    shapes = [(8, 8, 400), (16, 16, 800), (32, 24, 1600), (2048, 6, 2048)]
    wide = [StepPoint(f"w{i}", t, s, c, 0.0) for i, (t, s, c) in enumerate(shapes)]
    wide = [replace(p, step_s=predict(line, p)) for p in wide]
    small = [StepPoint("x1", 1, 1, 50, 0.018), StepPoint("x4", 4.5, 4, 200, 0.020)]
    law = fit_step_time([*small, *wide], floor_tokens=5)
    assert law.kernel_floor_s == pytest.approx(0.019)
    assert law.kernel_base_s == pytest.approx(line.base_s, rel=1e-6)
    assert law.per_token_s == pytest.approx(line.per_token_s, rel=1e-6)
    assert law.base_s == 0.0
    # flat at the bottom (the line alone would price one token at 12 ms), the line above
    assert predict(law, small[0]) == pytest.approx(0.019)
    assert all(predict(law, p) == pytest.approx(p.step_s, rel=1e-6) for p in wide)
    # no point at or below the knee: the plain line, no floor
    assert fit_step_time(wide, floor_tokens=5).kernel_floor_s == 0.0


def test_fit_never_returns_a_negative_cost() -> None:
    # steps that get *faster* with context would need a negative context cost
    points = [
        StepPoint("a", 1, 1, 100, 0.020),
        StepPoint("b", 4, 4, 400, 0.030),
        StepPoint("c", 4, 4, 4000, 0.025),
        StepPoint("d", 16, 16, 1600, 0.060),
    ]
    fit = fit_step_time(points)
    assert min(fit.base_s, fit.per_token_s, fit.per_seq_s, fit.per_context_token_s) >= 0
    assert fit.per_context_token_s == 0
    with pytest.raises(ValueError):
        fit_step_time([])


def test_preset_is_the_fit_of_the_measured_points() -> None:
    assert MEASURED, "realcpu.MEASURED is empty: run bench/calibrate.py fit"
    fit = fit_step_time(MEASURED, FLOOR_TOKENS)
    assert CPU_ENGINE.fitted is not None
    for name in (
        "base_s",
        "per_token_s",
        "per_seq_s",
        "per_context_token_s",
        "kernel_base_s",
        "kernel_floor_s",
    ):
        assert getattr(CPU_ENGINE.fitted, name) == pytest.approx(
            getattr(fit, name), rel=0.02, abs=1e-7
        ), name


def test_the_preset_for_a_cpu_without_avx512_is_the_fit_of_its_points() -> None:
    """Linear from the first seat (no floor), within 10 % of every point it was fitted to,
    and chosen for a server without a GPU on a CPU vtop read as lacking AVX-512 and AMX."""
    fit = fit_step_time(SLOWHOST)
    law = CPU_ENGINE_NO_AVX512.fitted
    assert law is not None and law.kernel_floor_s == 0
    for name in ("base_s", "per_token_s", "per_seq_s", "per_context_token_s"):
        assert getattr(law, name) == pytest.approx(getattr(fit, name), rel=0.02, abs=1e-7), name
    for p in SLOWHOST:
        assert predict(law, p) == pytest.approx(p.step_s, rel=0.10), p.label
    assert prior_preset(None, "vtop/engine", avx512=False)[0] is CPU_ENGINE_NO_AVX512
    assert prior_preset(None, "vtop/engine", avx512=True)[0] is CPU_ENGINE
    assert prior_preset(None, "vtop/engine")[0] is CPU_ENGINE


def test_preset_reproduces_every_measured_step() -> None:
    fit = CPU_ENGINE.fitted
    assert fit is not None
    for p in MEASURED:
        assert predict(fit, p) == pytest.approx(p.step_s, rel=0.3), p.label


def test_step_cost_uses_the_fit() -> None:
    cost = StepCost(CPU_ENGINE)
    fit = CPU_ENGINE.fitted
    assert fit is not None
    kernel, host = cost.step(8, 8 * 200, 8 * 200, 8, 8)
    assert kernel + host == pytest.approx(predict(fit, StepPoint("x", 8, 8, 1600, 0.0)))
    # decode: each extra sequence costs a token and a request; prefill tokens are cheaper
    one = sum(cost.step(1, 100, 100, 1, 1))
    sixteen = sum(cost.step(16, 1600, 1600, 16, 16))
    assert sixteen > one  # on two cores a wider batch is not free


def test_preset_registered_with_cpu_defaults() -> None:
    assert PRESETS["cpu-engine"] is CPU_ENGINE
    assert CPU_ENGINE.gpu is None
    r = resolve(real_args(max_num_seqs=16, num_gpu_blocks=24), CPU_ENGINE)
    assert r.kv_capacity_tokens == 3072  # 24 blocks of 128, as cache_config_info says
    assert (r.max_num_batched_tokens, r.max_model_len) == (2048, 2048)
    assert resolve(real_args(max_num_seqs=4, num_gpu_blocks=160), CPU_ENGINE).num_gpu_blocks == 160
    assert CPU_ENGINE.kv_bytes_per_token == 8 * 8 * 128 * 2 * 2


def test_uniform_shapes_match_the_load_generator() -> None:
    shapes = uniform_shapes((16, 128), (100, 400))
    prompts = sorted({s.prompt.mean for s in shapes})
    outputs = sorted({s.output.mean for s in shapes})
    assert len(shapes) == len(prompts) * len(outputs) == 64
    assert prompts[0] >= 16 and prompts[-1] <= 128
    assert sum(prompts) / len(prompts) == pytest.approx(72, abs=1)
    assert sum(outputs) / len(outputs) == pytest.approx(250, abs=1)
    # ignore_eos: every request generates exactly max_tokens and finishes "length"
    assert all(s.max_tokens == s.output.mean and s.finish == "length" for s in shapes)
    assert len(uniform_shapes((1, 1), (3, 4))) == 2


def test_twin_page_matches_the_real_command_line() -> None:
    twin = real_twin(max_num_seqs=16, num_gpu_blocks=24, clients=2, prompt=(16, 32), output=(8, 16))
    text = twin.metrics_text().decode()
    assert 'block_size="128"' in text and 'num_gpu_blocks="24"' in text
    argv = twin.command_line
    assert argv[argv.index("--max-num-seqs") + 1] == "16"
    assert argv[argv.index("--num-gpu-blocks-override") + 1] == "24"


def test_binding_wall() -> None:
    assert (
        binding_wall(running=10, waiting=30, kv=0.97, preemptions_per_s=1.3, max_num_seqs=16)
        == "KV"
    )
    assert (
        binding_wall(running=4, waiting=12, kv=0.03, preemptions_per_s=0, max_num_seqs=4)
        == "batch cap"
    )
    assert (
        binding_wall(running=2, waiting=0, kv=0.2, preemptions_per_s=0, max_num_seqs=16) == "none"
    )
    assert (
        binding_wall(running=6, waiting=5, kv=0.4, preemptions_per_s=0, max_num_seqs=16)
        == "unclear"
    )


@pytest.mark.parametrize("config", CONFIGS, ids=[c.name for c in CONFIGS])
def test_twin_binds_the_configurations_wall(config: object) -> None:
    from tests.simtools.realcpu import RealConfig

    assert isinstance(config, RealConfig)
    f = sample_twin(config.twin(), seconds=60, warmup_s=15)
    assert f.wall(config.max_num_seqs) == config.wall, f
    assert f.generation_tps > 0


def test_page_sampler_needs_two_pages() -> None:
    s = PageSampler()
    with pytest.raises(ValueError):
        s.figures()


def test_at_speed_scales_the_preset_to_a_machine_three_times_slower() -> None:
    """A twin sampled at 3x the preset's step time is read back as 3x slower, and the preset
    scaled by that runs the same configuration at the same speed: steps/s within 5 %."""
    from tests.simtools.realcpu import at_speed
    from vtop.whatif.fit import scaled

    kv = CONFIGS[0]
    slow = scaled(CPU_ENGINE, 3.0)
    seen = sample_twin(kv.twin(slow), seconds=60, warmup_s=15)
    here, factor = at_speed(CPU_ENGINE, seen, sample_twin(kv.twin(), seconds=60, warmup_s=15))
    assert factor == pytest.approx(3.0, rel=0.05)
    again = sample_twin(kv.twin(here), seconds=60, warmup_s=15)
    assert again.steps_per_s == pytest.approx(seen.steps_per_s, rel=0.05)
    assert again.wall(kv.max_num_seqs) == "KV"
    idle = replace(seen, steps_per_s=0.0)
    with pytest.raises(ValueError, match="stepped"):
        at_speed(CPU_ENGINE, idle, seen)
