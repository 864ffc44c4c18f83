"""GPU readings that behave like NVML's, derived from what the twin's kernels did.

- Utilisation: NVML's `utilization.gpu` is the share of the last sample period (about a second)
  during which any kernel ran, not how hard it ran: a small decode batch that keeps the GPU
  busy reads high. The twin reports exactly that share from the engine's kernel intervals.
- Memory: vLLM preallocates at start-up (weights + profiled activations + the whole KV pool at
  `gpu_memory_utilization`), so used memory is flat whatever the load.
- Power: idle draw plus a share of the headroom to the power limit that grows with activity.
- Temperature: a first-order lag (time constant `thermal_tau_s`) toward a target set by power.
- SM clock: idle clock when nothing ran in the last second, boost clock (a little lower under
  heavy power) otherwise.
"""

from __future__ import annotations

import math

from vtop.model import GpuReading, GpuStatus
from vtop.sim.hardware import MIB, GpuSpec, activation_peak_bytes
from vtop.sim.serve_args import Resolved


class GpuModel:
    """The twin's GPUs (one per tensor-parallel rank), advanced with the engine."""

    def __init__(self, resolved: Resolved) -> None:
        self.resolved = resolved
        preset = resolved.preset
        self.spec: GpuSpec | None = preset.gpu
        tp = preset.tensor_parallel_size
        kv_bytes = resolved.num_gpu_blocks * resolved.args.block_size * preset.kv_bytes_per_token
        used = (
            preset.weight_bytes / tp
            + kv_bytes / tp
            + activation_peak_bytes(preset, resolved.max_num_batched_tokens, resolved.max_num_seqs)
            + preset.non_torch_bytes
            + preset.cuda_graph_bytes
        )
        total = self.spec.memory_bytes if self.spec else 0
        self.mem_used = int(min(total, used))
        self.temp_c = self.spec.temp_idle_c if self.spec else 0.0
        self.power_w = self.spec.power_idle_w if self.spec else 0.0

    def _power(self, util: float) -> float:
        spec = self.spec
        assert spec is not None
        headroom = spec.power_limit_w * 0.9 - spec.power_idle_w
        return spec.power_idle_w + headroom * (util**0.9 if util > 0 else 0.0)

    def advance(self, dt: float, mean_util: float) -> None:
        """Let temperature follow the power of the last `dt` seconds."""
        spec = self.spec
        if spec is None or dt <= 0:
            return
        power = self._power(mean_util)
        frac = (power - spec.power_idle_w) / (spec.power_limit_w - spec.power_idle_w)
        target = spec.temp_idle_c + (spec.temp_full_c - spec.temp_idle_c) * frac
        self.temp_c = target + (self.temp_c - target) * math.exp(-dt / spec.thermal_tau_s)

    def status(self, util_last_s: float) -> GpuStatus:
        spec = self.spec
        if spec is None:
            return GpuStatus(unavailable="no GPU: this twin models a CPU server")
        power = self._power(util_last_s)
        frac = (power - spec.power_idle_w) / (spec.power_limit_w - spec.power_idle_w)
        clock = (
            spec.sm_clock_idle_mhz
            if util_last_s < 0.005
            else spec.sm_clock_boost_mhz * (1 - 0.06 * frac)
        )
        gpus = []
        for index in range(self.resolved.preset.tensor_parallel_size):
            uuid = spec.uuid if index == 0 else f"{spec.uuid[:-2]}{index:02d}"
            gpus.append(
                GpuReading(
                    index=index,
                    name=spec.name,
                    uuid=uuid,
                    util_pct=round(util_last_s * 100.0, 1),
                    mem_used_bytes=self.mem_used,
                    mem_total_bytes=spec.memory_bytes,
                    power_w=round(power, 1),
                    power_limit_w=spec.power_limit_w,
                    temp_c=round(self.temp_c, 1),
                    sm_clock_mhz=round(clock),
                    process_mem_bytes=self.mem_used - 256 * MIB,
                )
            )
        return GpuStatus(gpus=tuple(gpus))
