"""What one engine step costs on a given GPU and model: a roofline, and the presets it runs on.

The twin has to reproduce *why* a knob matters, not a benchmark to three digits. Decode is
memory-bound (every step reads all weights once, plus each sequence's KV cache), prefill is
compute-bound (2 FLOPs per parameter per token), and a step pays a fixed host-side cost (Python
scheduling, sampling, launching) during which the GPU sits idle. That is the seeds' whole story
in three terms, so the step time is exactly that:

    kernel = max(bytes_read / (bandwidth * memory_efficiency), flops / (peak * compute_efficiency))
    step   = kernel + overhead_base + overhead_per_seq * scheduled_requests

NVML's "utilisation" is the share of time a kernel ran, so `kernel / step` is what the twin's
GPU reading shows; that is why a 64-sequence batch reads ~55% busy and a 256-sequence one ~90%.

KV capacity follows vLLM's own arithmetic (`gpu_worker.determine_available_memory`): the budget
is `total * gpu_memory_utilization`, minus weights, minus the profiled activation peak (which
grows with `max_num_batched_tokens`) and non-torch memory; what is left, divided by the KV bytes
of one block, is `num_gpu_blocks`.

A preset is plain data. The `cpu-engine` preset, fitted to the real vLLM CPU server, sets
`fitted` (a linear step-time law, see vtop/sim/calibration.py) instead of relying on the
roofline, and `gpu=None` so the twin reports no GPU, as that server would.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from vtop.knobs import FALLBACK, SchedulerDefaults, scheduler_defaults

GIB = 1024**3
MIB = 1024**2


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """One accelerator as NVML and a roofline see it."""

    name: str
    memory_bytes: int
    bandwidth_bytes_s: float
    peak_flops: float
    """Dense bf16/fp16 tensor throughput with fp32 accumulate (what GEMMs in PyTorch get)."""
    power_idle_w: float
    power_limit_w: float
    sm_clock_idle_mhz: float
    sm_clock_boost_mhz: float
    temp_idle_c: float
    temp_full_c: float
    thermal_tau_s: float = 40.0
    uuid: str = "GPU-5a1d7e0e-0000-4000-8000-000000000000"


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """The shape of a decoder-only transformer, enough for bytes and FLOPs per token."""

    name: str
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    num_params: float
    max_position: int
    tied_embeddings: bool = False

    @property
    def vocab_matrix_params(self) -> float:
        return float(self.vocab_size * self.hidden_size)

    @property
    def embedding_params(self) -> float:
        """Input embedding plus LM head (one matrix when tied, as in Qwen2.5-0.5B)."""
        return self.vocab_matrix_params * (1 if self.tied_embeddings else 2)

    @property
    def linear_params(self) -> float:
        """Parameters of the transformer blocks' Linears (what a quantiser packs)."""
        return self.num_params - self.embedding_params

    def kv_bytes_per_token(self, dtype_bytes: int) -> int:
        """K and V for every layer: layers x kv_heads x head_dim x 2 x bytes."""
        return self.num_layers * self.num_kv_heads * self.head_dim * 2 * dtype_bytes


@dataclass(frozen=True, slots=True)
class FittedStepTime:
    """A step-time law fitted to a real server, used instead of the roofline when present.

    kernel = max(kernel_floor_s, kernel_base_s + per_token_s * scheduled_tokens
                 + per_seq_s * scheduled_requests + per_context_token_s * context_tokens_read)
    step   = kernel + base_s

    `kernel_floor_s` is what the smallest steps cost however few tokens they carry (a GPU's
    weights read once a step; the CPU build's steps up to about five tokens); 0 for a law that
    is linear all the way down.
    """

    base_s: float
    per_token_s: float
    per_seq_s: float
    per_context_token_s: float = 0.0
    kernel_base_s: float = 0.0
    kernel_floor_s: float = 0.0
    prompt_token_s: float = 0.0
    """What a short prompt's token was seen to add to a step on the machine the law was fitted
    to (0: not measured): a seat costs this plus `per_token_s + per_seq_s - prompt_token_s` of
    bookkeeping, which a server computing slower than it steps does not scale alike
    (`vtop.whatif.fit`)."""

    def kernel_s(self, tokens: float, seqs: float, context_tokens: float) -> float:
        """The kernel part of one step (the law above, without `base_s`)."""
        line = (
            self.kernel_base_s
            + self.per_token_s * tokens
            + self.per_seq_s * seqs
            + self.per_context_token_s * context_tokens
        )
        return max(line, self.kernel_floor_s)


@dataclass(frozen=True, slots=True)
class Preset:
    """A model served on a device: everything the twin needs besides the scheduler knobs.

    `weight_bytes` is what vLLM reports as "Model loading took X GiB". `compute_efficiency`
    and `memory_efficiency` are the share of peak a real engine reaches (AWQ GEMMs at large
    batch dequantise on the fly and reach less of the tensor peak than bf16 ones).
    """

    name: str
    description: str
    model: ModelSpec
    served_model_name: str
    weight_bytes: int
    gpu: GpuSpec | None
    quantization: str | None = None
    dtype: str = "bfloat16"
    kv_cache_dtype: str = "auto"
    kv_dtype_bytes: int = 2
    compute_efficiency: float = 0.7
    memory_efficiency: float = 0.8
    overhead_base_s: float = 0.006
    overhead_per_seq_s: float = 0.000008
    activation_bytes_per_batched_token: int = 96 * 1024
    non_torch_bytes: int = int(0.6 * GIB)
    cuda_graph_bytes: int = int(0.4 * GIB)
    tensor_parallel_size: int = 1
    fitted: FittedStepTime | None = None
    scheduler_override: SchedulerDefaults | None = None
    """The scheduler defaults where they are not vLLM's for the GPU (`vtop.knobs`)."""

    @property
    def scheduler_defaults(self) -> SchedulerDefaults:
        """vLLM's max_num_seqs / max_num_batched_tokens defaults for this device."""
        if self.scheduler_override is not None:
            return self.scheduler_override
        return scheduler_defaults(None, self.gpu.memory_bytes if self.gpu is not None else None)

    @property
    def default_max_num_seqs(self) -> int:
        return self.scheduler_defaults.max_num_seqs

    @property
    def default_max_num_batched_tokens(self) -> int:
        return self.scheduler_defaults.max_num_batched_tokens

    @property
    def kv_bytes_per_token(self) -> int:
        return self.model.kv_bytes_per_token(self.kv_dtype_bytes)

    @property
    def weight_bytes_read_per_step(self) -> float:
        """Every weight is read once per step except the input embedding, of which a step
        only gathers the rows of its tokens (fp16/bf16 even in AWQ checkpoints)."""
        if self.model.tied_embeddings:
            return float(self.weight_bytes)
        return self.weight_bytes - self.model.vocab_matrix_params * 2

    def with_kv_cache_dtype(self, kv_cache_dtype: str) -> Preset:
        """`--kv-cache-dtype fp8`: one byte per element, about twice the KV capacity."""
        nbytes = 1 if kv_cache_dtype.startswith("fp8") else 2
        return replace(self, kv_cache_dtype=kv_cache_dtype, kv_dtype_bytes=nbytes)


def activation_peak_bytes(preset: Preset, max_num_batched_tokens: int, max_num_seqs: int) -> int:
    """The profile run's peak: activations for a full token budget plus sampler logits."""
    logits = max_num_seqs * preset.model.vocab_size * 4
    return preset.activation_bytes_per_batched_token * max_num_batched_tokens + logits


def num_gpu_blocks(
    preset: Preset,
    *,
    gpu_memory_utilization: float,
    block_size: int,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    num_gpu_blocks_override: int | None = None,
) -> int:
    """KV blocks vLLM would allocate, as `determine_available_memory` computes them."""
    if num_gpu_blocks_override is not None:
        return num_gpu_blocks_override
    if preset.gpu is None:
        # CPU backend: VLLM_CPU_KVCACHE_SPACE (GiB) sizes the pool; 4 GiB is vLLM's default.
        budget = 4 * GIB
    else:
        per_gpu = preset.gpu.memory_bytes * gpu_memory_utilization
        used = (
            preset.weight_bytes / preset.tensor_parallel_size
            + activation_peak_bytes(preset, max_num_batched_tokens, max_num_seqs)
            + preset.non_torch_bytes
            + preset.cuda_graph_bytes
        )
        budget = int((per_gpu - used) * preset.tensor_parallel_size)
    per_block = block_size * preset.kv_bytes_per_token
    return max(0, budget // per_block)


class StepCost:
    """Step time of one engine iteration from what the scheduler put into it.

    Inputs are the step's scheduled tokens, the KV context those tokens attend over, the
    number of requests and of sampled tokens. Returns (kernel_s, host_s): the GPU-busy part
    and the host-side part during which the GPU idles.
    """

    __slots__ = (
        "_attn_flops_per_pair",
        "_base",
        "_comp_rate",
        "_fit",
        "_flops_per_token",
        "_kv_bytes",
        "_lm_head_flops",
        "_mem_rate",
        "_per_seq",
        "_weight_bytes",
        "last_flops",
        "last_read_bytes",
        "last_write_bytes",
    )

    def __init__(self, preset: Preset) -> None:
        model = preset.model
        tp = preset.tensor_parallel_size
        self._fit = preset.fitted
        self._weight_bytes = preset.weight_bytes_read_per_step / tp
        self._kv_bytes = preset.kv_bytes_per_token / tp
        # 2 FLOPs per multiply-add in every block Linear; the LM head only for sampled tokens
        # (vLLM computes logits for the last position of each request only).
        self._flops_per_token = 2.0 * model.linear_params / tp
        self._lm_head_flops = 2.0 * model.vocab_matrix_params / tp
        # QK^T and AV: 2 matmuls x 2 FLOPs x heads x head_dim per (query, key) pair per layer.
        self._attn_flops_per_pair = 4.0 * model.num_layers * model.num_heads * model.head_dim / tp
        gpu = preset.gpu
        self._mem_rate = gpu.bandwidth_bytes_s * preset.memory_efficiency if gpu else 1.0
        self._comp_rate = gpu.peak_flops * preset.compute_efficiency if gpu else 1.0
        self._base = preset.overhead_base_s
        self._per_seq = preset.overhead_per_seq_s
        self.last_flops = 0.0
        """FLOPs, bytes read and bytes written of the last priced step, per GPU (what vLLM's
        `estimated_*_per_gpu` counters add up; 0 for a fitted, non-GPU preset)."""
        self.last_read_bytes = 0.0
        self.last_write_bytes = 0.0

    def step(
        self, tokens: int, context_tokens: int, attn_pairs: float, seqs: int, samples: int
    ) -> tuple[float, float]:
        """(kernel_s, host_s) for one step.

        `context_tokens` is the KV read (sum over scheduled requests of their context after
        the step); `attn_pairs` the (query, key) pairs attention computes.
        """
        fit = self._fit
        if fit is not None:
            return fit.kernel_s(tokens, seqs, context_tokens), fit.base_s
        read = self._weight_bytes + self._kv_bytes * context_tokens
        write = self._kv_bytes * tokens
        mem = (read + write) / self._mem_rate
        flops = (
            self._flops_per_token * tokens
            + self._lm_head_flops * samples
            + self._attn_flops_per_pair * attn_pairs
        )
        self.last_flops = flops
        self.last_read_bytes = read
        self.last_write_bytes = write
        comp = flops / self._comp_rate
        kernel = mem if mem > comp else comp
        return kernel, self._base + self._per_seq * seqs


# --- the presets ------------------------------------------------------------------------------

RTX_4090 = GpuSpec(
    name="NVIDIA GeForce RTX 4090",
    memory_bytes=24564 * MIB,
    bandwidth_bytes_s=1008e9,
    peak_flops=165.2e12,
    power_idle_w=22.0,
    power_limit_w=450.0,
    sm_clock_idle_mhz=210.0,
    sm_clock_boost_mhz=2520.0,
    temp_idle_c=34.0,
    temp_full_c=71.0,
    uuid="GPU-4090a1d7-0c3e-4b1f-9a55-6e2f1c7d8b90",
)

H100_SXM = GpuSpec(
    name="NVIDIA H100 80GB HBM3",
    memory_bytes=81559 * MIB,
    bandwidth_bytes_s=3.35e12,
    peak_flops=989e12,
    power_idle_w=70.0,
    power_limit_w=700.0,
    sm_clock_idle_mhz=345.0,
    sm_clock_boost_mhz=1980.0,
    temp_idle_c=31.0,
    temp_full_c=66.0,
    uuid="GPU-h100b2e8-1d4f-4c20-8b66-7f3a2d8e9ca1",
)

QWEN25_7B = ModelSpec(
    name="Qwen/Qwen2.5-7B-Instruct",
    num_layers=28,
    hidden_size=3584,
    num_heads=28,
    num_kv_heads=4,
    head_dim=128,
    intermediate_size=18944,
    vocab_size=152064,
    num_params=7.62e9,
    max_position=32768,
)


def _awq_weight_bytes(model: ModelSpec) -> int:
    """4-bit packed Linears plus fp16 scales and zeros per 128-group; embeddings stay fp16."""
    packed = model.linear_params * (0.5 + 2.5 / 128)
    return int(packed + model.embedding_params * 2)


QWEN_4090_BF16 = Preset(
    name="4090-qwen7b-bf16",
    description="RTX 4090 24 GB, Qwen2.5-7B-Instruct in bf16 (15.2 GB of weights, a small KV pool)",
    model=QWEN25_7B,
    served_model_name="Qwen/Qwen2.5-7B-Instruct",
    weight_bytes=int(QWEN25_7B.num_params * 2),
    gpu=RTX_4090,
)

QWEN_4090_AWQ = Preset(
    name="4090-qwen7b-awq",
    description="RTX 4090 24 GB, Qwen2.5-7B-Instruct-AWQ int4 (5.6 GB of weights, a large KV pool)",
    model=QWEN25_7B,
    served_model_name="Qwen/Qwen2.5-7B-Instruct-AWQ",
    weight_bytes=_awq_weight_bytes(QWEN25_7B),
    gpu=RTX_4090,
    quantization="awq_marlin",
    dtype="float16",
)

QWEN_H100_BF16 = Preset(
    name="h100-qwen7b-bf16",
    description="H100 80 GB SXM, Qwen2.5-7B-Instruct in bf16",
    model=QWEN25_7B,
    served_model_name="Qwen/Qwen2.5-7B-Instruct",
    weight_bytes=int(QWEN25_7B.num_params * 2),
    gpu=H100_SXM,
    overhead_base_s=0.004,
    overhead_per_seq_s=0.00001,
)

QWEN25_05B = ModelSpec(
    name="Qwen/Qwen2.5-0.5B-Instruct",
    num_layers=24,
    hidden_size=896,
    num_heads=14,
    num_kv_heads=2,
    head_dim=64,
    intermediate_size=4864,
    vocab_size=151936,
    num_params=0.494e9,
    max_position=32768,
    tied_embeddings=True,
)

QWEN05_4090_BF16 = Preset(
    name="4090-qwen0.5b-bf16",
    description="RTX 4090 24 GB, Qwen2.5-0.5B-Instruct in bf16 (an engine faster than its API)",
    model=QWEN25_05B,
    served_model_name="Qwen/Qwen2.5-0.5B-Instruct",
    weight_bytes=int(QWEN25_05B.num_params * 2),
    gpu=RTX_4090,
    activation_bytes_per_batched_token=24 * 1024,
)

UNIT_MODEL = ModelSpec(
    name="unit-step",
    num_layers=1,
    hidden_size=64,
    num_heads=1,
    num_kv_heads=1,
    head_dim=64,
    intermediate_size=64,
    vocab_size=256,
    num_params=1.0e5,
    max_position=4096,
)

UNIT_STEP = Preset(
    name="unit-step",
    description="Every engine step takes exactly one virtual second (the seeds' step counting)",
    model=UNIT_MODEL,
    served_model_name="unit-step",
    weight_bytes=0,
    gpu=None,
    fitted=FittedStepTime(base_s=0.0, per_token_s=0.0, per_seq_s=0.0, kernel_base_s=1.0),
)
"""The seeds count steps, not seconds: a kernel of 1 s and no host cost makes them equal."""

CPU_ENGINE_MODEL = ModelSpec(
    name="vtop/engine",
    num_layers=8,
    hidden_size=1024,
    num_heads=8,
    num_kv_heads=8,
    head_dim=128,
    intermediate_size=2816,
    vocab_size=508,
    num_params=103.8e6,
    max_position=2048,
)
"""tools/vllm_cpu's `engine` model: a Llama shape with random weights, ~100M parameters."""

CPU_ENGINE = Preset(
    name="cpu-engine",
    description=(
        "The real vLLM CPU server of tools/vllm_cpu (vllm-cpu 0.32, 2 cores) with its ~100M "
        "`engine` model; step time fitted to that server (vtop/sim/calibration.py)"
    ),
    model=CPU_ENGINE_MODEL,
    served_model_name="vtop/engine",
    weight_bytes=int(CPU_ENGINE_MODEL.num_params * 2),
    gpu=None,
    fitted=FittedStepTime(
        base_s=0.0,
        per_token_s=0.0011869,
        per_seq_s=0.00017871,
        per_context_token_s=5.190e-07,
        kernel_base_s=0.010949,
        kernel_floor_s=0.019045,
        prompt_token_s=0.00071,
    ),
    scheduler_override=FALLBACK,
)
"""Step time fitted to the real server on 2026-11-30 and 2026-12-06: at least 19.0 ms, else
10.9 ms + 1.19 ms per scheduled token + 0.18 ms per request + 0.52 us per context token
(`MEASURED` in tests/simtools/realcpu.py holds the points, `FLOOR_TOKENS` the knee; the fit:
`vtop.sim.calibration.fit_step_time`). A prompt token of 40-75-token prompts added 0.71 ms
(0.65-0.78 over five recorded regimes, scaled to this law's level; docs/calibration.md).
vLLM's CPU defaults for the OpenAI server are 128 seqs and 2048 batched tokens."""

CPU_ENGINE_NO_AVX512 = replace(
    CPU_ENGINE,
    name="cpu-engine-no-avx512",
    description="The real vLLM CPU server on a 2-core x86 CPU without AVX-512 or AMX (float32)",
    weight_bytes=int(CPU_ENGINE_MODEL.num_params * 4),
    fitted=FittedStepTime(
        base_s=0.025055,
        per_token_s=0.0023319,
        per_seq_s=0.0,
        per_context_token_s=1.3453e-05,
        prompt_token_s=0.0031,
    ),
)
"""Step time fitted to the real server on a CPU without AVX-512 (2026-12-07, float32): 25.1 ms +
2.3 ms per scheduled token + 13.5 us per context token, no floor: every seat adds to the step
(2 seats 32 ms, 4 seats 46 ms, 24 seats 127 ms), where on the AVX-512 CPU steps of up to five
tokens cost the same; the KV cache is read in float32 (64 KiB a token) without AVX-512. A
40-token prompt's token added 2.7-3.6 ms (`SLOWHOST` in tests/simtools/realcpu.py)."""

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        QWEN_4090_BF16,
        QWEN_4090_AWQ,
        QWEN_H100_BF16,
        QWEN05_4090_BF16,
        UNIT_STEP,
        CPU_ENGINE,
        CPU_ENGINE_NO_AVX512,
    )
}
