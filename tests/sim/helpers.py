"""Shared builders for the simulator tests."""

from __future__ import annotations

from vtop.sim.frontend import FrontendSpec
from vtop.sim.hardware import UNIT_STEP
from vtop.sim.serve_args import ServeArgs
from vtop.sim.twin import Twin
from vtop.sim.workload import Workload

ZERO_FRONTEND = FrontendSpec(0.0, 0.0, 0.0, 0.0, 0.0)


def unit_twin(
    workload: Workload, *, max_num_seqs: int, budget: int = 64, blocks: int = 1024
) -> Twin:
    """A twin whose every engine step takes one virtual second and whose API server is free."""
    args = ServeArgs(
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=budget,
        max_model_len=4096,
        num_gpu_blocks_override=blocks,
    )
    return Twin.of(UNIT_STEP, args, workload, frontend=ZERO_FRONTEND)
