"""The canonical signals vtop reads, and every name vLLM has given them.

vLLM renames metrics between releases (`gpu_cache_usage_perc` became `kv_cache_usage_perc`,
`time_per_output_token_seconds` became `inter_token_latency_seconds`, early V1 counted prefix
cache hits as `gpu_prefix_cache_hits`), adds labels (`engine` from 0.8.5) and removes series.
Rules, charts and traces speak only canonical names; this table is the one place that knows the
wire names. When a page carries several aliases of one signal (0.10 shows both KV names), the
first alias listed wins.

Each signal also says how engines and models combine into one number (`combine`): counts and
rates add up, KV usage is the fullest engine's, histograms add bucket by bucket. And it carries
the one-paragraph explanation the TUI shows for `e` (explain).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Literal


class Kind(Enum):
    GAUGE = "gauge"
    COUNTER = "counter"
    HISTOGRAM = "histogram"
    INFO = "info"


Combine = Literal["sum", "max"]


@dataclass(frozen=True, slots=True)
class Signal:
    """One canonical signal.

    `aliases` are wire names without the `_total` / `_bucket` / `_sum` / `_count` suffixes,
    newest first. `label` is the one label that tells this signal's series apart beyond
    `model_name` and `engine` (e.g. `reason`). `scale` converts the wire unit to `unit`.
    """

    name: str
    kind: Kind
    unit: str
    aliases: tuple[str, ...]
    help: str
    label: str | None = None
    combine: Combine = "sum"
    scale: float = 1.0
    vllm: bool = True


def _s(
    name: str,
    kind: Kind,
    unit: str,
    aliases: str | tuple[str, ...],
    help: str,
    **kw: object,
) -> Signal:
    names = (aliases,) if isinstance(aliases, str) else aliases
    return Signal(name, kind, unit, names, " ".join(help.split()), **kw)  # type: ignore[arg-type]


G, C, H, INFO = Kind.GAUGE, Kind.COUNTER, Kind.HISTOGRAM, Kind.INFO

SIGNALS: tuple[Signal, ...] = (
    # -- scheduler ---------------------------------------------------------------------------
    _s(
        "running",
        G,
        "requests",
        "vllm:num_requests_running",
        """Requests in the running batch this step. It plateaus at max_num_seqs when the batch
       cap binds, and below it when KV blocks or the token budget bind. Jitter under load is
       the mark of preemption.""",
    ),
    _s(
        "waiting",
        G,
        "requests",
        "vllm:num_requests_waiting",
        """Requests queued for admission. Staying above 0 means demand exceeds what the
       scheduler admits: KV blocks, max_num_seqs or max_num_batched_tokens is the wall.""",
    ),
    _s(
        "waiting_by_reason",
        G,
        "requests",
        "vllm:num_requests_waiting_by_reason",
        """Waiting requests by why they wait (0.20+): `capacity` (no KV blocks or batch slot)
       or `deferred` (held back by the scheduler's policy).""",
        label="reason",
    ),
    _s(
        "swapped",
        G,
        "requests",
        "vllm:num_requests_swapped",
        """V0 only: requests whose KV blocks were swapped out to CPU memory under pressure.""",
    ),
    _s(
        "kv_usage",
        G,
        "ratio",
        ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        """Share of the KV-cache pool in use (0..1). Near 1, new requests cannot be admitted and
       running ones are preempted; the fix is memory (quantisation, FP8 KV cache,
       gpu_memory_utilization, a shorter max_model_len), not a larger batch cap.""",
        combine="max",
    ),
    _s(
        "cpu_cache_usage",
        G,
        "ratio",
        "vllm:cpu_cache_usage_perc",
        """V0 only: share of the CPU swap space in use by swapped-out KV blocks.""",
        combine="max",
    ),
    _s(
        "preemptions",
        C,
        "preemptions",
        "vllm:num_preemptions",
        """Requests evicted from the batch because the KV pool ran dry (V1 recomputes them
       later). A safety valve, not a steady state: a steady rate means the batch is past its
       sweet spot or memory is the wall.""",
    ),
    _s(
        "engine_sleep",
        G,
        "state",
        "vllm:engine_sleep_state",
        """Sleep mode of the engine: an asleep engine is not an idle one.""",
        label="sleep_state",
        combine="max",
    ),
    # -- tokens and requests -------------------------------------------------------------------
    _s(
        "prompt_tokens",
        C,
        "tokens",
        "vllm:prompt_tokens",
        """Prompt (prefill) tokens processed. Its rate is prefill throughput.""",
    ),
    _s(
        "generation_tokens",
        C,
        "tokens",
        "vllm:generation_tokens",
        """Tokens generated (decode). Its rate is the server's output throughput.""",
    ),
    _s(
        "cached_prompt_tokens",
        C,
        "tokens",
        "vllm:prompt_tokens_cached",
        """Prompt tokens served from the prefix cache instead of being computed (0.20+).""",
    ),
    _s(
        "requests_finished",
        C,
        "requests",
        "vllm:request_success",
        """Finished requests by reason. `length` means the request reached its max_tokens,
       which is normal when clients set it; it is not truncation.""",
        label="finished_reason",
    ),
    _s(
        "prefix_cache_queries",
        C,
        "tokens",
        ("vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries"),
        """Tokens looked up in the prefix cache (blocks in early V1). Hit rate is
       Δhits / Δqueries.""",
    ),
    _s(
        "prefix_cache_hits",
        C,
        "tokens",
        ("vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits"),
        """Tokens found in the prefix cache (blocks in early V1).""",
    ),
    _s(
        "prefix_cache_hit_rate_v0",
        G,
        "ratio",
        "vllm:gpu_prefix_cache_hit_rate",
        """V0 only: the prefix-cache hit rate as the engine computed it.""",
        combine="max",
    ),
    _s(
        "admission_rejections",
        C,
        "requests",
        "vllm:admission_rejections",
        """Requests the API server refused before they reached the engine (0.33).""",
        label="reason",
    ),
    _s(
        "prompt_throughput_v0",
        G,
        "tokens/s",
        "vllm:avg_prompt_throughput_toks_per_s",
        """V0 only: the engine's own average prompt throughput.""",
    ),
    _s(
        "generation_throughput_v0",
        G,
        "tokens/s",
        "vllm:avg_generation_throughput_toks_per_s",
        """V0 only: the engine's own average generation throughput.""",
    ),
    # -- per-step and per-request histograms -----------------------------------------------------
    _s(
        "iteration_tokens",
        H,
        "tokens",
        "vllm:iteration_tokens_total",
        """Tokens scheduled per engine step (prefill + decode). Steps that sit at
       max_num_batched_tokens mean the token budget, not the batch cap, is what binds.""",
    ),
    _s(
        "ttft",
        H,
        "seconds",
        "vllm:time_to_first_token_seconds",
        """Time to first token: queueing plus prefill. Compare with queue time to tell
       admission delay from prefill work.""",
    ),
    _s(
        "itl",
        H,
        "seconds",
        ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
        """Inter-token latency: time between consecutive output tokens of a request. It grows
       with the batch and with prefills that share the step.""",
    ),
    _s(
        "tpot",
        H,
        "seconds",
        "vllm:request_time_per_output_token_seconds",
        """Per-request mean time per output token.""",
    ),
    _s(
        "e2e",
        H,
        "seconds",
        "vllm:e2e_request_latency_seconds",
        """End-to-end request latency as the server saw it.""",
    ),
    _s(
        "queue_time",
        H,
        "seconds",
        "vllm:request_queue_time_seconds",
        """Time requests spent waiting for admission. A large share of TTFT here means the
       server is queue-bound, not prefill-bound.""",
    ),
    _s(
        "prefill_time",
        H,
        "seconds",
        "vllm:request_prefill_time_seconds",
        """Time from admission to the first token (the prefill phase).""",
    ),
    _s(
        "decode_time",
        H,
        "seconds",
        "vllm:request_decode_time_seconds",
        """Time from the first to the last token (the decode phase).""",
    ),
    _s(
        "inference_time",
        H,
        "seconds",
        "vllm:request_inference_time_seconds",
        """Time requests spent running (prefill + decode).""",
    ),
    _s("prompt_len", H, "tokens", "vllm:request_prompt_tokens", """Prompt length per request."""),
    _s(
        "generation_len",
        H,
        "tokens",
        "vllm:request_generation_tokens",
        """Generated tokens per request.""",
    ),
    _s(
        "max_tokens_param",
        H,
        "tokens",
        "vllm:request_params_max_tokens",
        """The max_tokens parameter requests asked for.""",
    ),
    _s(
        "request_preemptions",
        H,
        "preemptions",
        "vllm:request_num_preemptions",
        """Preemptions suffered per finished request (0.33).""",
    ),
    # -- configuration -------------------------------------------------------------------------
    _s(
        "cache_config",
        INFO,
        "",
        "vllm:cache_config_info",
        """The KV-cache configuration, one label per setting.""",
    ),
    # -- the API server process (absent in multiprocess mode) ----------------------------------
    _s(
        "api_cpu_seconds",
        C,
        "seconds",
        "process_cpu_seconds",
        """CPU time of the process serving /metrics (the API server). A rate near 1 means the
       front end pegs a core.""",
        vllm=False,
    ),
    _s(
        "api_start_time",
        G,
        "seconds",
        "process_start_time_seconds",
        """Start time of the API server process; a change means a restart.""",
        vllm=False,
        combine="max",
    ),
    # -- GPUs, as dcgm-exporter publishes them (NVML readings use the same names) ---------------
    _s(
        "gpu_util",
        G,
        "percent",
        "DCGM_FI_DEV_GPU_UTIL",
        """GPU utilisation: the share of time any kernel ran. A small decode batch can read
       high; it corroborates, it does not prove saturation.""",
        label="gpu",
        vllm=False,
        combine="max",
    ),
    _s(
        "gpu_mem_used",
        G,
        "bytes",
        "DCGM_FI_DEV_FB_USED",
        """GPU memory in use.""",
        label="gpu",
        vllm=False,
        scale=1024.0 * 1024.0,
    ),
    _s(
        "gpu_mem_free",
        G,
        "bytes",
        "DCGM_FI_DEV_FB_FREE",
        """GPU memory free.""",
        label="gpu",
        vllm=False,
        scale=1024.0 * 1024.0,
    ),
    _s(
        "gpu_power",
        G,
        "watts",
        "DCGM_FI_DEV_POWER_USAGE",
        """GPU power draw.""",
        label="gpu",
        vllm=False,
    ),
    _s(
        "gpu_temp",
        G,
        "celsius",
        "DCGM_FI_DEV_GPU_TEMP",
        """GPU temperature.""",
        label="gpu",
        vllm=False,
        combine="max",
    ),
    _s(
        "gpu_sm_clock",
        G,
        "MHz",
        "DCGM_FI_DEV_SM_CLOCK",
        """GPU SM clock.""",
        label="gpu",
        vllm=False,
        combine="max",
    ),
    _s("gpu_mem_total", G, "bytes", (), """GPU memory in all (NVML).""", label="gpu", vllm=False),
    _s("gpu_power_limit", G, "watts", (), """GPU power limit (NVML).""", label="gpu", vllm=False),
    # -- what vtop measures of each scrape (on no page) ------------------------------------------
    _s(
        "up",
        G,
        "",
        (),
        """1 when the last poll of the endpoint succeeded, 0 when it failed.""",
        vllm=False,
        combine="max",
    ),
    _s(
        "scrape_latency",
        G,
        "seconds",
        (),
        """How long /metrics took to answer. A starved API server answers late, and then its
       gauges (running, waiting, KV) lie: counters and this latency tell the truth.""",
        vllm=False,
        combine="max",
    ),
    _s("scrape_bytes", G, "bytes", (), """Size of the /metrics page.""", vllm=False),
    _s(
        "host_cpu",
        G,
        "ratio",
        (),
        """Share of this host's CPU time busy since the previous poll (0..1, psutil), on an
       endpoint served from this host only. Near 1, an API server that answers late is short
       of cores, not of processes: the engine's threads hold them all (vLLM's CPU build).""",
        vllm=False,
        combine="max",
    ),
)

BY_NAME: dict[str, Signal] = {s.name: s for s in SIGNALS}


@dataclass(frozen=True, slots=True)
class Route:
    """How one wire metric name maps onto a signal: which part, and alias rank (0 = best)."""

    signal: Signal
    part: Literal["value", "bucket", "sum", "count"]
    rank: int


def _wire_table() -> dict[str, Route]:
    table: dict[str, Route] = {}
    for sig in SIGNALS:
        for rank, alias in enumerate(sig.aliases):
            if sig.kind is Kind.COUNTER:
                table[alias + "_total"] = Route(sig, "value", rank)
            elif sig.kind is Kind.HISTOGRAM:
                table[alias + "_bucket"] = Route(sig, "bucket", rank)
                table[alias + "_sum"] = Route(sig, "sum", rank)
                table[alias + "_count"] = Route(sig, "count", rank)
            else:
                table[alias] = Route(sig, "value", rank)
    return table


WIRE: dict[str, Route] = _wire_table()
"""Every wire metric name vtop understands -> its route."""


def signal(name: str) -> Signal:
    """The signal called `name`; KeyError names the unknown signal."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown signal {name!r}") from None
