"""The /metrics families of the newest vLLM the simulator emulates, with names, help and buckets.

Read from vLLM's own exporter (`vllm/v1/metrics/loggers.py`) and checked family by family
(names, types, help, label keys, buckets) against pages captured from a real vLLM 0.32 server
(tests/fixtures/metrics/vllm-0.32). `NEWEST` is its page in order; an older version's page is
a delta over it (`vtop.sim.dialects`), so a new release is an edit here and a delta there, and
what an old version lacks or names otherwise is written once, as a difference.

Bucket bounds are vLLM's, older ones beside (an older dialect's delta names them):
request-latency buckets 0.3..7680 s, TTFT 0.001..2560 s, per-token 0.01..80 s,
`iteration_tokens_total` 1..16384, token-count histograms `build_1_2_5_buckets(max_model_len)`
(`TOKENS_125`). V1 pages also carry prometheus-fastapi-instrumentator's `http_*` series (`HTTP`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["counter", "gauge", "histogram", "summary"]
Scope = Literal["engine", "model", "none"]

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


def hist(name: str, help_: str, source: str, buckets: tuple[float, ...] | str) -> Family:
    return Family(name, "histogram", help_, source, buckets)


def counter(name: str, help_: str, source: str) -> Family:
    return Family(name, "counter", help_, source)


def gauge(name: str, help_: str, source: str) -> Family:
    return Family(name, "gauge", help_, source)


LATENCY = (
    hist(
        "vllm:e2e_request_latency_seconds",
        "Histogram of e2e request latency in seconds.",
        "e2e",
        REQUEST_LATENCY_V1,
    ),
    hist(
        "vllm:request_queue_time_seconds",
        "Histogram of time spent in WAITING phase for request.",
        "queue",
        REQUEST_LATENCY_V1,
    ),
    hist(
        "vllm:request_inference_time_seconds",
        "Histogram of time spent in RUNNING phase for request.",
        "inference",
        REQUEST_LATENCY_V1,
    ),
    hist(
        "vllm:request_prefill_time_seconds",
        "Histogram of time spent in PREFILL phase for request.",
        "prefill",
        REQUEST_LATENCY_V1,
    ),
    hist(
        "vllm:request_decode_time_seconds",
        "Histogram of time spent in DECODE phase for request.",
        "decode",
        REQUEST_LATENCY_V1,
    ),
)

SHAPE = (
    hist(
        "vllm:request_prompt_tokens",
        "Number of prefill tokens processed.",
        "prompt_len",
        TOKENS_125,
    ),
    hist(
        "vllm:request_generation_tokens",
        "Number of generation tokens processed.",
        "gen_len",
        TOKENS_125,
    ),
    hist(
        "vllm:iteration_tokens_total",
        "Histogram of number of tokens per engine_step.",
        "iter_tokens",
        ITERATION_TOKENS,
    ),
    hist(
        "vllm:request_max_num_generation_tokens",
        "Histogram of maximum number of requested generation tokens.",
        "max_gen",
        TOKENS_125,
    ),
    hist("vllm:request_params_n", "Histogram of the n request parameter.", "n", PARAMS_N),
    hist(
        "vllm:request_params_max_tokens",
        "Histogram of the max_tokens request parameter.",
        "max_tokens",
        TOKENS_125,
    ),
)

_PERF_HELP = " per GPU (for Model Flops Utilization calculations)."

HTTP = (
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

NEWEST: tuple[Family, ...] = (
    counter(
        "vllm:estimated_flops_per_gpu",
        "Estimated number of floating point operations" + _PERF_HELP,
        "perf_flops",
    ),
    counter(
        "vllm:estimated_read_bytes_per_gpu",
        "Estimated number of bytes read from memory" + _PERF_HELP,
        "perf_read",
    ),
    counter(
        "vllm:estimated_write_bytes_per_gpu",
        "Estimated number of bytes written to memory" + _PERF_HELP,
        "perf_write",
    ),
    gauge("vllm:num_requests_running", "Number of requests in model execution batches.", "running"),
    gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", "waiting"),
    gauge(
        "vllm:num_requests_waiting_by_reason",
        "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for "
        "scheduling capacity; 'deferred' = deferred by transient constraints (LoRA budget, "
        "KV transfer, blocked status). Sum of all reasons equals vllm:num_requests_waiting.",
        "waiting_by_reason",
    ),
    gauge(
        "vllm:engine_sleep_state",
        "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is "
        "awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
        "sleep_state",
    ),
    gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", "kv"),
    counter(
        "vllm:prefix_cache_queries",
        "Prefix cache queries, in terms of number of queried tokens.",
        "prefix_queries",
    ),
    counter(
        "vllm:prefix_cache_hits",
        "Prefix cache hits, in terms of number of cached tokens.",
        "prefix_hits",
    ),
    counter(
        "vllm:external_prefix_cache_queries",
        "External prefix cache queries from KV connector cross-instance cache sharing, in "
        "terms of number of queried tokens.",
        "zero",
    ),
    counter(
        "vllm:external_prefix_cache_hits",
        "External prefix cache hits from KV connector cross-instance cache sharing, in terms "
        "of number of cached tokens.",
        "zero",
    ),
    counter(
        "vllm:mm_cache_queries",
        "Multi-modal cache queries, in terms of number of queried items.",
        "zero",
    ),
    counter(
        "vllm:mm_cache_hits", "Multi-modal cache hits, in terms of number of cached items.", "zero"
    ),
    counter(
        "vllm:num_preemptions",
        "Cumulative number of preemption from the engine.",
        "preemptions",
    ),
    counter("vllm:prompt_tokens", "Number of prefill tokens processed.", "prompt_tokens"),
    counter(
        "vllm:prompt_tokens_by_source", "Number of prompt tokens by source.", "prompt_by_source"
    ),
    counter(
        "vllm:prompt_tokens_cached",
        "Number of cached prompt tokens (local + external).",
        "prompt_tokens_cached",
    ),
    counter(
        "vllm:prompt_tokens_cached_by_source",
        "Prefix-cache hit tokens by the cache tier that supplied them: device (local HBM), "
        "host (offloaded to DRAM), disk, p2p (transferred from another vLLM instance) or "
        "external_unspecified. Counted at admission; sums to vllm:prefix_cache_hits + "
        "vllm:external_prefix_cache_hits.",
        "cached_by_source",
    ),
    counter(
        "vllm:generation_tokens", "Number of generation tokens processed.", "generation_tokens"
    ),
    counter("vllm:request_success", "Count of successfully processed requests.", "success"),
    Family(
        "vllm:admission_rejections",
        "counter",
        "Number of admission attempts rejected by a queue limit, by reason.",
        "admission",
        scope="model",
    ),
    *SHAPE,
    hist(
        "vllm:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        "ttft",
        TTFT_V1,
    ),
    hist(
        "vllm:inter_token_latency_seconds",
        "Histogram of inter-token latency in seconds.",
        "itl",
        PER_TOKEN_V1,
    ),
    hist(
        "vllm:request_time_per_output_token_seconds",
        "Histogram of time_per_output_token_seconds per request.",
        "req_tpot",
        PER_TOKEN_V1,
    ),
    *LATENCY,
    hist(
        "vllm:request_num_preemptions",
        "Histogram of the number of times a request was preempted.",
        "num_preemptions",
        NUM_PREEMPTIONS,
    ),
    hist(
        "vllm:request_prefill_kv_computed_tokens",
        "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
        "prefill_kv_computed",
        TOKENS_125,
    ),
    gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", "cache_info"),
    *HTTP,
)
"""vLLM 0.32's families, in the order its page writes them (the "0.32" dialect)."""
