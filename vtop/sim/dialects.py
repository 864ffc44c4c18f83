"""Which /metrics families each emulated vLLM version emits: the newest's, and each older
version as what it removes, renames and adds.

An older page is mostly the newest one: copying its families per version made every fix to a
shared family a fix in three places, and hid what actually differs. So the newest page is
written once (`vtop.sim.families.NEWEST`) and each older version is a `Delta` over it, read
from vLLM's own exporters:

- "0.10": V1 `vllm/v1/metrics/loggers.py` of 0.10.x: labels `model_name`, `engine`;
  `gpu_cache_usage_perc` (documented DEPRECATED) beside `kv_cache_usage_perc`;
  `gpu_prefix_cache_queries/hits` (deprecated) beside `prefix_cache_queries/hits`, all in
  tokens; `time_per_output_token_seconds` where 0.32 has `inter_token_latency_seconds` and
  `request_time_per_output_token_seconds`; none of 0.32's additions (`*_by_reason`,
  `*_by_source`, `engine_sleep_state`, `admission_rejections`, the perf counters, ...);
  `request_success` for stop/length/abort.
- "0.6": V0 `vllm/engine/metrics.py` as shipped in 0.6.0/0.6.1: labels `model_name` only;
  `prometheus_client.disable_created_metrics()` so no `_created` series; swap-era gauges
  (`num_requests_swapped`, `cpu_cache_usage_perc`), block hit-rate gauges
  (`gpu_prefix_cache_hit_rate`, -1 when prefix caching is off), the deprecated
  `avg_prompt_throughput_toks_per_s` / `avg_generation_throughput_toks_per_s` gauges (5 s
  local interval), `time_per_output_token_seconds`, TTFT buckets to 10 s, e2e buckets 1..60 s,
  and its own order (the cache config first). (0.6.3+ added queue/prefill/decode histograms
  and `tokens_total`; 0.6.5 dropped the avg gauges. The "0.6" dialect is the 0.6.0 shape, the
  oldest a user is likely to still run.)

A page is rendered in its families' order, so a delta places what it adds or moves;
tests/sim/test_sim_metrics.py holds each dialect to the families and labels vLLM writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from vtop.sim.families import (
    E2E_V0,
    HTTP,
    LATENCY,
    NEWEST,
    PARAMS_N,
    PER_TOKEN_V0,
    PER_TOKEN_V1,
    TOKENS_125,
    TTFT_V0,
    Family,
    counter,
    gauge,
    hist,
)
from vtop.sim.stats import build_1_2_5_buckets

DIALECTS: tuple[str, ...] = ("0.6", "0.10", "0.32")
DEFAULT_DIALECT = "0.32"
VERSIONS: dict[str, str] = {"0.6": "0.6.1", "0.10": "0.10.1.1", "0.32": "0.32.0"}
"""The `/version` each dialect answers."""

Place = tuple[Family | str, str | None]
"""A family put on an older page: a new `Family` or the name of one the page has (moved),
before the family of that name (None: at the end)."""


@dataclass(frozen=True, slots=True)
class Delta:
    """An older version's page as changes to the newest's, applied in this order."""

    removed: tuple[str, ...] = ()
    """The newest's families this version does not write."""
    changed: Mapping[str, Family] = field(default_factory=dict)
    """The newest's family (by its name) as this version writes it: renamed, or with another
    help or buckets, in the same place."""
    placed: tuple[Place, ...] = ()
    """Families this version adds or writes elsewhere, one after another."""

    def apply(self, newest: tuple[Family, ...]) -> tuple[Family, ...]:
        page = [self.changed.get(f.name, f) for f in newest if f.name not in self.removed]
        for what, before in self.placed:
            if isinstance(what, str):
                what = page.pop(next(i for i, f in enumerate(page) if f.name == what))
            at = len(page) if before is None else [f.name for f in page].index(before)
            page.insert(at, what)
        return tuple(page)


def _names(families: tuple[Family, ...]) -> tuple[str, ...]:
    return tuple(f.name for f in families)


_NEWER_THAN_0_10 = (
    "vllm:estimated_flops_per_gpu",
    "vllm:estimated_read_bytes_per_gpu",
    "vllm:estimated_write_bytes_per_gpu",
    "vllm:num_requests_waiting_by_reason",
    "vllm:engine_sleep_state",
    "vllm:external_prefix_cache_queries",
    "vllm:external_prefix_cache_hits",
    "vllm:mm_cache_queries",
    "vllm:mm_cache_hits",
    "vllm:prompt_tokens_by_source",
    "vllm:prompt_tokens_cached",
    "vllm:prompt_tokens_cached_by_source",
    "vllm:admission_rejections",
    "vllm:request_time_per_output_token_seconds",
    "vllm:request_num_preemptions",
    "vllm:request_prefill_kv_computed_tokens",
)
"""The newest's families that 0.10 does not write yet."""

_KV_USAGE = "vllm:kv_cache_usage_perc"
_ITL = "vllm:inter_token_latency_seconds"
_TPOT = "vllm:time_per_output_token_seconds"
_TPOT_HELP = "Histogram of time per output token in seconds."

V0_10 = Delta(
    removed=_NEWER_THAN_0_10,
    changed={_ITL: hist(_TPOT, _TPOT_HELP, "itl", PER_TOKEN_V1)},
    placed=(
        (
            gauge(
                "vllm:gpu_cache_usage_perc",
                "GPU KV-cache usage. 1 means 100 percent usage.DEPRECATED: Use "
                "vllm:kv_cache_usage_perc instead.",
                "kv",
            ),
            _KV_USAGE,
        ),
        (
            counter(
                "vllm:gpu_prefix_cache_queries",
                "GPU prefix cache queries, in terms of number of queried"
                "tokens. DEPRECATED: Use vllm:prefix_cache_queries instead.",
                "prefix_queries",
            ),
            _KV_USAGE,
        ),
        (
            counter(
                "vllm:gpu_prefix_cache_hits",
                "GPU prefix cache hits, in terms of number of cached tokens. DEPRECATED: Use "
                "vllm:prefix_cache_hits instead.",
                "prefix_hits",
            ),
            _KV_USAGE,
        ),
    ),
)

_GPU_KV_USAGE = "vllm:gpu_cache_usage_perc"
_PREEMPTIONS = "vllm:num_preemptions"

V0_6 = Delta(
    removed=(
        *_NEWER_THAN_0_10,
        "vllm:prefix_cache_queries",
        "vllm:prefix_cache_hits",
        "vllm:iteration_tokens_total",
        "vllm:request_max_num_generation_tokens",
        "vllm:request_params_max_tokens",
        *_names(LATENCY[1:]),  # the request phases: all but e2e
        *_names(HTTP),  # V0's server carried no instrumentator
    ),
    changed={
        "vllm:num_requests_running": gauge(
            "vllm:num_requests_running", "Number of requests currently running on GPU.", "running"
        ),
        _KV_USAGE: gauge(_GPU_KV_USAGE, "GPU KV-cache usage. 1 means 100 percent usage.", "kv"),
        "vllm:time_to_first_token_seconds": hist(
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            "ttft",
            TTFT_V0,
        ),
        _ITL: hist(_TPOT, _TPOT_HELP, "itl", PER_TOKEN_V0),
        "vllm:e2e_request_latency_seconds": hist(
            "vllm:e2e_request_latency_seconds",
            "Histogram of end to end request latency in seconds.",
            "e2e",
            E2E_V0,
        ),
    },
    placed=(
        ("vllm:cache_config_info", "vllm:num_requests_running"),
        (
            gauge("vllm:num_requests_swapped", "Number of requests swapped to CPU.", "zero"),
            _GPU_KV_USAGE,
        ),
        (
            gauge(
                "vllm:cpu_cache_usage_perc",
                "CPU KV-cache usage. 1 means 100 percent usage.",
                "zero",
            ),
            _PREEMPTIONS,
        ),
        (
            gauge(
                "vllm:cpu_prefix_cache_hit_rate", "CPU prefix cache block hit rate.", "cpu_hit_rate"
            ),
            _PREEMPTIONS,
        ),
        (
            gauge(
                "vllm:gpu_prefix_cache_hit_rate",
                "GPU prefix cache block hit rate.",
                "block_hit_rate",
            ),
            _PREEMPTIONS,
        ),
        # latency before the request shapes, the successes after them
        ("vllm:time_to_first_token_seconds", "vllm:request_prompt_tokens"),
        (_TPOT, "vllm:request_prompt_tokens"),
        ("vllm:e2e_request_latency_seconds", "vllm:request_prompt_tokens"),
        ("vllm:request_success", None),
        (
            hist(
                "vllm:request_params_best_of",
                "Histogram of the best_of request parameter.",
                "n",
                PARAMS_N,
            ),
            "vllm:request_params_n",
        ),
        (
            gauge(
                "vllm:avg_prompt_throughput_toks_per_s",
                "Average prefill throughput in tokens/s.",
                "avg_prompt",
            ),
            None,
        ),
        (
            gauge(
                "vllm:avg_generation_throughput_toks_per_s",
                "Average generation throughput in tokens/s.",
                "avg_generation",
            ),
            None,
        ),
    ),
)

TABLES: dict[str, tuple[Family, ...]] = {
    "0.6": V0_6.apply(NEWEST),
    "0.10": V0_10.apply(NEWEST),
    "0.32": NEWEST,
}


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
