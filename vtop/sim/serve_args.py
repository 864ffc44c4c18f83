"""The `vllm serve` arguments a scenario runs with: knobs, the argv, and the scheduler config.

One frozen value holds every knob the user could have typed, None or vLLM's defaults where it
was not (`vtop.knobs`: on a GPU under 70 GiB `max_num_seqs` 256, `max_num_batched_tokens` 2048,
`gpu_memory_utilization` 0.92, `block_size` 16, prefix caching on). The twin derives the KV
pool from it exactly once, and the rest of vtop sees the same values three ways: `knobs` (what
discovery would find), `command_line` (what `ps` would show for the vLLM process) and
`vllm:cache_config_info` labels on the page.
"""

from __future__ import annotations

from dataclasses import dataclass

from vtop import knobs
from vtop.knobs import KnobValue
from vtop.sim.hardware import Preset, num_gpu_blocks
from vtop.sim.scheduler import SchedulerConfig


@dataclass(frozen=True, slots=True)
class ServeArgs:
    """Knobs as `vllm serve` takes them; None means "left at the default for the preset"."""

    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float = knobs.GPU_MEMORY_UTILIZATION
    block_size: int = knobs.BLOCK_SIZE
    enable_prefix_caching: bool = knobs.PREFIX_CACHING
    kv_cache_dtype: str = knobs.KV_CACHE_DTYPE
    long_prefill_token_threshold: int = 0
    num_gpu_blocks_override: int | None = None
    port: int = 8000


@dataclass(frozen=True, slots=True)
class Resolved:
    """ServeArgs with every default filled in for a preset, plus the derived KV pool."""

    args: ServeArgs
    preset: Preset
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    num_gpu_blocks: int

    @property
    def kv_capacity_tokens(self) -> int:
        return self.num_gpu_blocks * self.args.block_size

    def scheduler_config(self) -> SchedulerConfig:
        a = self.args
        return SchedulerConfig(
            max_num_seqs=self.max_num_seqs,
            max_num_batched_tokens=self.max_num_batched_tokens,
            block_size=a.block_size,
            num_gpu_blocks=self.num_gpu_blocks,
            max_model_len=self.max_model_len,
            long_prefill_token_threshold=a.long_prefill_token_threshold,
            enable_prefix_caching=a.enable_prefix_caching,
        )

    def knobs(self) -> dict[str, int | float | str | bool]:
        """Every knob by its engine-argument name (quantization "none" when unquantised)."""
        a = self.args
        p = self.preset
        return {
            "max_num_seqs": self.max_num_seqs,
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "max_model_len": self.max_model_len,
            "gpu_memory_utilization": a.gpu_memory_utilization,
            "block_size": a.block_size,
            "enable_prefix_caching": a.enable_prefix_caching,
            "enable_chunked_prefill": True,
            "long_prefill_token_threshold": a.long_prefill_token_threshold,
            "kv_cache_dtype": p.kv_cache_dtype,
            "tensor_parallel_size": p.tensor_parallel_size,
            "quantization": p.quantization or "none",
            "dtype": p.dtype,
            "num_gpu_blocks": self.num_gpu_blocks,
            "served_model_name": p.served_model_name,
        }

    def command_line(self) -> list[str]:
        """The `vllm serve ...` argv this configuration corresponds to."""
        a = self.args
        p = self.preset
        argv = ["vllm", "serve", p.served_model_name]
        if p.quantization:
            argv += knobs.flag_argv("quantization", p.quantization)
        flags: list[tuple[str, KnobValue]] = [
            ("max_model_len", self.max_model_len),
            ("gpu_memory_utilization", a.gpu_memory_utilization),
            ("max_num_seqs", self.max_num_seqs),
            ("max_num_batched_tokens", self.max_num_batched_tokens),
            ("block_size", a.block_size),
        ]
        if p.kv_cache_dtype != knobs.KV_CACHE_DTYPE:
            flags.append(("kv_cache_dtype", p.kv_cache_dtype))
        if p.tensor_parallel_size != 1:
            flags.append(("tensor_parallel_size", p.tensor_parallel_size))
        if a.long_prefill_token_threshold:
            flags.append(("long_prefill_token_threshold", a.long_prefill_token_threshold))
        if a.num_gpu_blocks_override is not None:
            flags.append(("num_gpu_blocks_override", a.num_gpu_blocks_override))
        if not a.enable_prefix_caching:
            flags.append(("enable_prefix_caching", False))
        for name, value in flags:
            argv += knobs.flag_argv(name, value)
        argv += ["--port", str(a.port)]
        return argv


def resolve(args: ServeArgs, preset: Preset) -> Resolved:
    """Fill defaults from the preset and size the KV pool; ValueError on impossible knobs."""
    if args.kv_cache_dtype != preset.kv_cache_dtype:
        preset = preset.with_kv_cache_dtype(args.kv_cache_dtype)
    seqs = args.max_num_seqs or preset.default_max_num_seqs
    tokens = args.max_num_batched_tokens or max(preset.default_max_num_batched_tokens, seqs)
    max_len = args.max_model_len or preset.model.max_position
    if not 0 < args.gpu_memory_utilization <= 1:
        raise ValueError(
            f"gpu_memory_utilization must be in (0, 1], got {args.gpu_memory_utilization}"
        )
    blocks = num_gpu_blocks(
        preset,
        gpu_memory_utilization=args.gpu_memory_utilization,
        block_size=args.block_size,
        max_num_batched_tokens=tokens,
        max_num_seqs=seqs,
        num_gpu_blocks_override=args.num_gpu_blocks_override,
    )
    if blocks * args.block_size < max_len:
        raise ValueError(
            f"{preset.name}: KV pool of {blocks * args.block_size} tokens cannot hold one "
            f"max_model_len={max_len} sequence (vLLM refuses to start); lower max_model_len "
            f"or raise gpu_memory_utilization"
        )
    return Resolved(args, preset, seqs, tokens, max_len, blocks)
