"""Shared builders for the simulator tests."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Any

from vtop.knobs import KnobValue
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


def with_knobs(args: ServeArgs, changes: Mapping[str, KnobValue]) -> ServeArgs:
    """`args` with `changes` (knob name to value, as a recommendation or a sweep names them).

    The names are known only at run time, so mypy cannot hold each value to its field: each is
    held to its field's type here instead (an int does for a float, as in a signature)."""
    hints = typing.get_type_hints(ServeArgs)
    for name, value in changes.items():
        if name not in hints:
            raise ValueError(f"{name!r} is not a ServeArgs field")
        kinds = typing.get_args(hints[name]) or (hints[name],)
        whole = isinstance(value, int) and not isinstance(value, bool)
        if not (isinstance(value, kinds) or (float in kinds and whole)):
            raise TypeError(f"{name}={value!r}: ServeArgs.{name} is {hints[name]}")
    checked: dict[str, Any] = dict(changes)
    return dataclasses.replace(args, **checked)
