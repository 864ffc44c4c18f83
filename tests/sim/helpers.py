"""Shared builders for the simulator tests."""

from __future__ import annotations

from vtop.sim.frontend import FrontendSpec
from vtop.sim.hardware import UNIT_STEP, Preset
from vtop.sim.scenarios import Scenario
from vtop.sim.serve_args import ServeArgs
from vtop.sim.twin import Twin
from vtop.sim.workload import Workload

ZERO_FRONTEND = FrontendSpec(0.0, 0.0, 0.0, 0.0, 0.0)


def unit_twin(
    workload: Workload, *, max_num_seqs: int, budget: int = 64, blocks: int = 1024
) -> Twin:
    """A twin whose every engine step takes one virtual second and whose API server is free."""
    sc = Scenario(
        name="unit",
        title="unit-step",
        cause="",
        symptom="",
        rule=None,
        preset=UNIT_STEP,
        args=ServeArgs(
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=budget,
            max_model_len=4096,
            num_gpu_blocks_override=blocks,
        ),
        workload=workload,
        frontend=ZERO_FRONTEND,
    )
    return Twin(sc, epoch=0.0)


def custom_twin(preset: Preset, args: ServeArgs, workload: Workload, **kw: object) -> Twin:
    frontend = kw.pop("frontend", FrontendSpec())
    assert isinstance(frontend, FrontendSpec)
    sc = Scenario("custom", "", "", "", None, preset, args, workload, frontend)
    return Twin(sc, epoch=0.0, **kw)  # type: ignore[arg-type]
