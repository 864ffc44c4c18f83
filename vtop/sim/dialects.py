"""Which /metrics families each emulated vLLM version emits, with names, help and buckets.

Read from vLLM's own exporters (kept as data here so a new release is a table edit):

- "0.6": V0 `vllm/engine/metrics.py` as shipped in 0.6.0/0.6.1: labels `model_name` only;
  `prometheus_client.disable_created_metrics()` so no `_created` series; swap-era gauges
  (`num_requests_swapped`, `cpu_cache_usage_perc`), block hit-rate gauges
  (`gpu_prefix_cache_hit_rate`, -1 when prefix caching is off), the deprecated
  `avg_prompt_throughput_toks_per_s` / `avg_generation_throughput_toks_per_s` gauges (5 s
  local interval), `time_per_output_token_seconds`, TTFT buckets to 10 s, e2e buckets 1..60 s.
  (0.6.3+ added queue/prefill/decode histograms and `tokens_total`; 0.6.5 dropped the avg
  gauges. The "0.6" dialect is the 0.6.0 shape, the oldest a user is likely to still run.)
- "0.10": V1 `vllm/v1/metrics/loggers.py` of 0.10.x: labels `model_name`, `engine`;
  `gpu_cache_usage_perc` (documented DEPRECATED) beside `kv_cache_usage_perc`;
  `gpu_prefix_cache_queries/hits` (deprecated) beside `prefix_cache_queries/hits`, all in
  tokens; `time_per_output_token_seconds`; `request_success` for stop/length/abort.
- "0.32": current V1, checked family by family (names, types, help, label keys, buckets)
  against pages captured from a real vLLM 0.32 server (tests/fixtures/metrics/vllm-0.32):
  `inter_token_latency_seconds` and `request_time_per_output_token_seconds` replace
  `time_per_output_token_seconds`; `num_requests_waiting_by_reason{reason}`,
  `engine_sleep_state{sleep_state}`, `prompt_tokens_by_source{source}`,
  `prompt_tokens_cached`, `prompt_tokens_cached_by_source{source}`,
  `admission_rejections{reason}` (no `engine` label), `request_num_preemptions`,
  `request_prefill_kv_computed_tokens`, the `estimated_*_per_gpu` perf counters; the
  deprecated `gpu_*` names are gone.
- V1 pages also carry prometheus-fastapi-instrumentator's `http_*` series.

Bucket bounds are vLLM's: request-latency buckets 0.3..7680 s, TTFT 0.001..2560 s, per-token
0.01..80 s, `iteration_tokens_total` 1..16384, token-count histograms `build_1_2_5_buckets
(max_model_len)`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from vtop.sim.stats import build_1_2_5_buckets

Kind = Literal["counter", "gauge", "histogram", "summary"]
Scope = Literal["engine", "model", "none"]

DIALECTS: tuple[str, ...] = ("0.6", "0.10", "0.32")
DEFAULT_DIALECT = "0.32"
VERSIONS: dict[str, str] = {"0.6": "0.6.1", "0.10": "0.10.1.1", "0.32": "0.32.0"}
"""The `/version` each dialect answers."""

TTFT_V1 = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
TTFT_V0 = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
)
PER_TOKEN_V1 = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
PER_TOKEN_V0 = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)
REQUEST_LATENCY_V1 = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)
E2E_V0 = (1.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0)
ITERATION_TOKENS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
NUM_PREEMPTIONS = (1, 2, 3, 4, 5, 10, 20)
HTTP_HIGHR = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    1.5,
    2.0,
    2.5,
    3.0,
    3.5,
    4.0,
    4.5,
    5.0,
    7.5,
    10.0,
    30.0,
    60.0,
)
HTTP_FEW = (0.1, 0.5, 1.0)
PARAMS_N = (1, 2, 5, 10, 20)

TOKENS_125 = "1-2-5"
"""Placeholder bucket spec: `build_1_2_5_buckets(max_model_len)`."""


@dataclass(frozen=True, slots=True)
class Family:
    """One metric family of one dialect. `source` names the twin quantity it shows."""

    name: str
    kind: Kind
    help: str
    source: str
    buckets: tuple[float, ...] | str | None = None
    scope: Scope = "engine"
    """Labels: "engine" (`model_name` + `engine`, `model_name` only before V1), "model"
    (`model_name` only, as `admission_rejections`), "none" (the HTTP instrumentator's)."""


def _h(name: str, help_: str, source: str, buckets: tuple[float, ...] | str) -> Family:
    return Family(name, "histogram", help_, source, buckets)


def _c(name: str, help_: str, source: str) -> Family:
    return Family(name, "counter", help_, source)


def _g(name: str, help_: str, source: str) -> Family:
    return Family(name, "gauge", help_, source)


_V1_LATENCY = (
    _h(
        "vllm:e2e_request_latency_seconds",
        "Histogram of e2e request latency in seconds.",
        "e2e",
        REQUEST_LATENCY_V1,
    ),
    _h(
        "vllm:request_queue_time_seconds",
        "Histogram of time spent in WAITING phase for request.",
        "queue",
        REQUEST_LATENCY_V1,
    ),
    _h(
        "vllm:request_inference_time_seconds",
        "Histogram of time spent in RUNNING phase for request.",
        "inference",
        REQUEST_LATENCY_V1,
    ),
    _h(
        "vllm:request_prefill_time_seconds",
        "Histogram of time spent in PREFILL phase for request.",
        "prefill",
        REQUEST_LATENCY_V1,
    ),
    _h(
        "vllm:request_decode_time_seconds",
        "Histogram of time spent in DECODE phase for request.",
        "decode",
        REQUEST_LATENCY_V1,
    ),
)

_V1_SHAPE = (
    _h(
        "vllm:request_prompt_tokens",
        "Number of prefill tokens processed.",
        "prompt_len",
        TOKENS_125,
    ),
    _h(
        "vllm:request_generation_tokens",
        "Number of generation tokens processed.",
        "gen_len",
        TOKENS_125,
    ),
    _h(
        "vllm:iteration_tokens_total",
        "Histogram of number of tokens per engine_step.",
        "iter_tokens",
        ITERATION_TOKENS,
    ),
    _h(
        "vllm:request_max_num_generation_tokens",
        "Histogram of maximum number of requested generation tokens.",
        "max_gen",
        TOKENS_125,
    ),
    _h("vllm:request_params_n", "Histogram of the n request parameter.", "n", PARAMS_N),
    _h(
        "vllm:request_params_max_tokens",
        "Histogram of the max_tokens request parameter.",
        "max_tokens",
        TOKENS_125,
    ),
)

_RUNNING = _g(
    "vllm:num_requests_running", "Number of requests in model execution batches.", "running"
)
_WAITING = _g("vllm:num_requests_waiting", "Number of requests waiting to be processed.", "waiting")
_TTFT_V1 = _h(
    "vllm:time_to_first_token_seconds",
    "Histogram of time to first token in seconds.",
    "ttft",
    TTFT_V1,
)
_CACHE_INFO = _g("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", "cache_info")
_SUCCESS = _c("vllm:request_success", "Count of successfully processed requests.", "success")

_PERF_HELP = " per GPU (for Model Flops Utilization calculations)."

_HTTP = (
    Family(
        "http_requests",
        "counter",
        "Total number of requests by method, status and handler.",
        "http_requests",
        scope="none",
    ),
    Family(
        "http_request_size_bytes",
        "summary",
        "Content length of incoming requests by handler. Only value of header is respected. "
        "Otherwise ignored. No percentile calculated. ",
        "http_request_size",
        scope="none",
    ),
    Family(
        "http_response_size_bytes",
        "summary",
        "Content length of outgoing responses by handler. Only value of header is respected. "
        "Otherwise ignored. No percentile calculated. ",
        "http_response_size",
        scope="none",
    ),
    Family(
        "http_request_duration_highr_seconds",
        "histogram",
        "Latency with many buckets but no API specific labels. Made for more accurate "
        "percentile calculations. ",
        "http_highr",
        HTTP_HIGHR,
        scope="none",
    ),
    Family(
        "http_request_duration_seconds",
        "histogram",
        "Latency with only few buckets by handler. Made to be only used if aggregation by "
        "handler is important. ",
        "http_duration",
        HTTP_FEW,
        scope="none",
    ),
)
"""prometheus-fastapi-instrumentator's series on vLLM's OpenAI server (/metrics excluded)."""

V0_6: tuple[Family, ...] = (
    _CACHE_INFO,
    _g("vllm:num_requests_running", "Number of requests currently running on GPU.", "running"),
    _WAITING,
    _g("vllm:num_requests_swapped", "Number of requests swapped to CPU.", "zero"),
    _g("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.", "kv"),
    _g("vllm:cpu_cache_usage_perc", "CPU KV-cache usage. 1 means 100 percent usage.", "zero"),
    _g("vllm:cpu_prefix_cache_hit_rate", "CPU prefix cache block hit rate.", "cpu_hit_rate"),
    _g("vllm:gpu_prefix_cache_hit_rate", "GPU prefix cache block hit rate.", "block_hit_rate"),
    _c(
        "vllm:num_preemptions",
        "Cumulative number of preemption from the engine.",
        "preemptions",
    ),
    _c("vllm:prompt_tokens", "Number of prefill tokens processed.", "prompt_tokens"),
    _c("vllm:generation_tokens", "Number of generation tokens processed.", "generation_tokens"),
    _h(
        "vllm:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        "ttft",
        TTFT_V0,
    ),
    _h(
        "vllm:time_per_output_token_seconds",
        "Histogram of time per output token in seconds.",
        "itl",
        PER_TOKEN_V0,
    ),
    _h(
        "vllm:e2e_request_latency_seconds",
        "Histogram of end to end request latency in seconds.",
        "e2e",
        E2E_V0,
    ),
    _h(
        "vllm:request_prompt_tokens",
        "Number of prefill tokens processed.",
        "prompt_len",
        TOKENS_125,
    ),
    _h(
        "vllm:request_generation_tokens",
        "Number of generation tokens processed.",
        "gen_len",
        TOKENS_125,
    ),
    _h(
        "vllm:request_params_best_of",
        "Histogram of the best_of request parameter.",
        "n",
        PARAMS_N,
    ),
    _h("vllm:request_params_n", "Histogram of the n request parameter.", "n", PARAMS_N),
    _SUCCESS,
    _g(
        "vllm:avg_prompt_throughput_toks_per_s",
        "Average prefill throughput in tokens/s.",
        "avg_prompt",
    ),
    _g(
        "vllm:avg_generation_throughput_toks_per_s",
        "Average generation throughput in tokens/s.",
        "avg_generation",
    ),
)

V0_10: tuple[Family, ...] = (
    _RUNNING,
    _WAITING,
    _g(
        "vllm:gpu_cache_usage_perc",
        "GPU KV-cache usage. 1 means 100 percent usage.DEPRECATED: Use "
        "vllm:kv_cache_usage_perc instead.",
        "kv",
    ),
    _c(
        "vllm:gpu_prefix_cache_queries",
        "GPU prefix cache queries, in terms of number of queried"
        "tokens. DEPRECATED: Use vllm:prefix_cache_queries instead.",
        "prefix_queries",
    ),
    _c(
        "vllm:gpu_prefix_cache_hits",
        "GPU prefix cache hits, in terms of number of cached tokens. DEPRECATED: Use "
        "vllm:prefix_cache_hits instead.",
        "prefix_hits",
    ),
    _g("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", "kv"),
    _c(
        "vllm:prefix_cache_queries",
        "Prefix cache queries, in terms of number of queried tokens.",
        "prefix_queries",
    ),
    _c(
        "vllm:prefix_cache_hits",
        "Prefix cache hits, in terms of number of cached tokens.",
        "prefix_hits",
    ),
    _c(
        "vllm:num_preemptions",
        "Cumulative number of preemption from the engine.",
        "preemptions",
    ),
    _c("vllm:prompt_tokens", "Number of prefill tokens processed.", "prompt_tokens"),
    _c("vllm:generation_tokens", "Number of generation tokens processed.", "generation_tokens"),
    _SUCCESS,
    *_V1_SHAPE,
    _TTFT_V1,
    _h(
        "vllm:time_per_output_token_seconds",
        "Histogram of time per output token in seconds.",
        "itl",
        PER_TOKEN_V1,
    ),
    *_V1_LATENCY,
    _CACHE_INFO,
    *_HTTP,
)

V0_32: tuple[Family, ...] = (
    _c(
        "vllm:estimated_flops_per_gpu",
        "Estimated number of floating point operations" + _PERF_HELP,
        "perf_flops",
    ),
    _c(
        "vllm:estimated_read_bytes_per_gpu",
        "Estimated number of bytes read from memory" + _PERF_HELP,
        "perf_read",
    ),
    _c(
        "vllm:estimated_write_bytes_per_gpu",
        "Estimated number of bytes written to memory" + _PERF_HELP,
        "perf_write",
    ),
    _RUNNING,
    _WAITING,
    _g(
        "vllm:num_requests_waiting_by_reason",
        "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for "
        "scheduling capacity; 'deferred' = deferred by transient constraints (LoRA budget, "
        "KV transfer, blocked status). Sum of all reasons equals vllm:num_requests_waiting.",
        "waiting_by_reason",
    ),
    _g(
        "vllm:engine_sleep_state",
        "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is "
        "awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
        "sleep_state",
    ),
    _g("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", "kv"),
    _c(
        "vllm:prefix_cache_queries",
        "Prefix cache queries, in terms of number of queried tokens.",
        "prefix_queries",
    ),
    _c(
        "vllm:prefix_cache_hits",
        "Prefix cache hits, in terms of number of cached tokens.",
        "prefix_hits",
    ),
    _c(
        "vllm:external_prefix_cache_queries",
        "External prefix cache queries from KV connector cross-instance cache sharing, in "
        "terms of number of queried tokens.",
        "zero",
    ),
    _c(
        "vllm:external_prefix_cache_hits",
        "External prefix cache hits from KV connector cross-instance cache sharing, in terms "
        "of number of cached tokens.",
        "zero",
    ),
    _c(
        "vllm:mm_cache_queries",
        "Multi-modal cache queries, in terms of number of queried items.",
        "zero",
    ),
    _c("vllm:mm_cache_hits", "Multi-modal cache hits, in terms of number of cached items.", "zero"),
    _c(
        "vllm:num_preemptions",
        "Cumulative number of preemption from the engine.",
        "preemptions",
    ),
    _c("vllm:prompt_tokens", "Number of prefill tokens processed.", "prompt_tokens"),
    _c("vllm:prompt_tokens_by_source", "Number of prompt tokens by source.", "prompt_by_source"),
    _c(
        "vllm:prompt_tokens_cached",
        "Number of cached prompt tokens (local + external).",
        "prompt_tokens_cached",
    ),
    _c(
        "vllm:prompt_tokens_cached_by_source",
        "Prefix-cache hit tokens by the cache tier that supplied them: device (local HBM), "
        "host (offloaded to DRAM), disk, p2p (transferred from another vLLM instance) or "
        "external_unspecified. Counted at admission; sums to vllm:prefix_cache_hits + "
        "vllm:external_prefix_cache_hits.",
        "cached_by_source",
    ),
    _c("vllm:generation_tokens", "Number of generation tokens processed.", "generation_tokens"),
    _SUCCESS,
    Family(
        "vllm:admission_rejections",
        "counter",
        "Number of admission attempts rejected by a queue limit, by reason.",
        "admission",
        scope="model",
    ),
    *_V1_SHAPE,
    _TTFT_V1,
    _h(
        "vllm:inter_token_latency_seconds",
        "Histogram of inter-token latency in seconds.",
        "itl",
        PER_TOKEN_V1,
    ),
    _h(
        "vllm:request_time_per_output_token_seconds",
        "Histogram of time_per_output_token_seconds per request.",
        "req_tpot",
        PER_TOKEN_V1,
    ),
    *_V1_LATENCY,
    _h(
        "vllm:request_num_preemptions",
        "Histogram of the number of times a request was preempted.",
        "num_preemptions",
        NUM_PREEMPTIONS,
    ),
    _h(
        "vllm:request_prefill_kv_computed_tokens",
        "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
        "prefill_kv_computed",
        TOKENS_125,
    ),
    _CACHE_INFO,
    *_HTTP,
)

TABLES: dict[str, tuple[Family, ...]] = {"0.6": V0_6, "0.10": V0_10, "0.32": V0_32}


@dataclass(frozen=True, slots=True)
class Dialect:
    """How one emulated version writes its page."""

    name: str
    version: str
    families: tuple[Family, ...]
    engine_label: bool
    created: bool
    finish_reasons: tuple[str, ...]
    """Reasons pre-created at 0 (V1 pre-creates every `FinishReason`; V0 only those seen)."""


def dialect(name: str) -> Dialect:
    """The dialect called `name` ("0.6", "0.10", "0.32"); ValueError names the valid ones."""
    key = normalise(name)
    v0 = key == "0.6"
    reasons: tuple[str, ...]
    if v0:
        reasons = ()
    elif key == "0.10":
        reasons = ("stop", "length", "abort")
    else:
        reasons = ("stop", "length", "abort", "error", "repetition")
    return Dialect(
        name=key,
        version=VERSIONS[key],
        families=TABLES[key],
        engine_label=not v0,
        created=not v0,
        finish_reasons=reasons,
    )


def normalise(name: str) -> str:
    """Map "0.32", "0.32.0", "v0.10.1" ... onto a dialect key."""
    text = name.strip().lstrip("vV")
    parts = text.split(".")
    if len(parts) >= 2 and parts[0] == "0" and parts[1].isdigit():
        minor = int(parts[1])
        if minor <= 7:
            return "0.6"
        if minor <= 11:
            return "0.10"
        return "0.32"
    raise ValueError(f"unknown vLLM version {name!r}; emulated dialects: {', '.join(DIALECTS)}")


def bucket_bounds(spec: tuple[float, ...] | str | None, max_model_len: int) -> tuple[float, ...]:
    if spec is None:
        return ()
    if spec == TOKENS_125:
        return tuple(float(b) for b in build_1_2_5_buckets(max_model_len))
    assert not isinstance(spec, str)
    return spec


def histogram_grids(max_model_len: int) -> dict[str, list[float]]:
    """For each histogram quantity, the union of every dialect's bounds."""
    grids: dict[str, set[float]] = {}
    for table in TABLES.values():
        for fam in table:
            if fam.kind == "histogram":
                bounds = bucket_bounds(fam.buckets, max_model_len)
                grids.setdefault(fam.source, set()).update(float(b) for b in bounds)
    return {k: sorted(v) for k, v in grids.items()}
